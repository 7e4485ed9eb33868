"""The configuration reference page, generated from the pydantic models it describes.

Every key of `StackConfig` and of the models under it becomes a row: its path, type, whether it
is required, its default, its constraints and the field's description. Generated rather than
written so that it cannot drift from the models (tests/unit/test_reference.py regenerates it and
compares). The stack outputs' page is `output_reference.py`; `docgen.py` writes both.
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic.functional_validators import AfterValidator, BeforeValidator
from pydantic_core import PydanticUndefined

from .config import NAMESPACE, StackConfig
from .cpulist import CpuSet
from .kubelet_config import OWNED, OWNED_WITH_CLUSTER

# What each value check of config.py accepts, as a reader would call the type. A validator missing
# here stops the generation (KeyError naming it): a new kind of value needs its name.
_CHECKED_TYPES = {
    "_parse_cpulist": "cpulist",
    "check_dns_label": "DNS-1123 label",
    "check_dns_name": "DNS-1123 name",
    "check_address": "IP address or DNS name",
    "check_unix_user": "user name",
    "check_absolute_path": "absolute path",
    "check_host_key": "SSH public key",
    "check_taint_key": "label key",
    "check_label_key": "label key",
    "check_label_value": "label value",
    "_check_token": "bootstrap token",
    "check_image": "image reference",
    "check_server_url": "https URL",
    "check_pem_certificate": "PEM certificate",
    "check_duration": "duration",
    "check_ip_address": "IP address",
    "check_command_argument": "string",
    "check_interface_name": "interface name",
    "check_ipv4_address": "IPv4 address",
    "check_ipv4_interface": "IPv4 address/prefix",
    "_check_max_unavailable": "count or percentage",
    "check_pci_address": "PCI address",
    "check_pci_class": "PCI class",
    "check_pci_class_prefix": "PCI class or prefix",
    "check_pci_id": "PCI id",
    "check_driver_name": "driver name",
    "check_device_node_glob": "device node glob",
    "check_extended_resource_name": "extended resource name",
}
_PLAIN_TYPES: dict[Any, str] = {
    int: "integer",
    str: "string",
    bool: "boolean",
    SecretStr: "secret string",
    CpuSet: "cpulist",
    Any: "any",
}


@dataclass(frozen=True)
class KeyRow:
    path: str
    type: str
    required: bool
    default: str
    constraints: str
    description: str
    section: str | None = None  # the path of the section describing the model it holds


@dataclass(frozen=True)
class ModelSection:
    path: str
    model: type[BaseModel]
    rows: tuple[KeyRow, ...]


def _without_none(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        rest = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return annotation


def _metadata(annotation: Any) -> tuple[Any, list[Any]]:
    """The annotation under its `Annotated` layers and every metadata item on the way."""
    found: list[Any] = []
    annotation = _without_none(annotation)
    while get_origin(annotation) is Annotated:
        base, *items = get_args(annotation)
        for item in items:
            found.extend(item.metadata if isinstance(item, FieldInfo) else [item])
        annotation = _without_none(base)
    return annotation, found


def nested_model(annotation: Any) -> tuple[type[BaseModel], str] | None:
    """The model a key holds and the suffix of its entries' path (`[]` for a list of them,
    `.<name>` for a map of names to them, else none), or None for a plain value."""
    base, _ = _metadata(annotation)
    suffix = ""
    if get_origin(base) is list:
        base, _ = _metadata(get_args(base)[0])
        suffix = "[]"
    elif get_origin(base) is dict:
        base, _ = _metadata(get_args(base)[1])
        suffix = ".<name>"
    if isinstance(base, type) and issubclass(base, BaseModel):
        return base, suffix
    return None


def type_name(annotation: Any, field_metadata: Sequence[Any] = ()) -> str:
    """`field_metadata`: what pydantic took off the annotation's outer `Annotated` into the field."""
    base, metadata = _metadata(annotation)
    for item in [*metadata, *field_metadata]:
        if isinstance(item, AfterValidator | BeforeValidator):
            return _CHECKED_TYPES[item.func.__name__]
    origin = get_origin(base)
    if origin is Literal:
        return " | ".join(f"`{value}`" for value in get_args(base))
    if origin is list:
        return f"list of {type_name(get_args(base)[0])}"
    if origin is dict:
        key, value = get_args(base)
        return "map" if value is Any else f"map of {type_name(key)} to {type_name(value)}"
    if isinstance(base, type) and issubclass(base, BaseModel):
        return "object"
    return _PLAIN_TYPES[base]


_BOUNDS = (
    (annotated_types.Ge, "ge"),
    (annotated_types.Le, "le"),
    (annotated_types.Gt, "gt"),
    (annotated_types.Lt, "lt"),
    (annotated_types.MinLen, "min_length"),
    (annotated_types.MaxLen, "max_length"),
)


def constraints(annotation: Any, field: FieldInfo) -> str:
    _, metadata = _metadata(annotation)
    bounds: dict[str, Any] = {}
    for item in [*metadata, *field.metadata]:
        for kind, name in _BOUNDS:
            if isinstance(item, kind):
                bounds[name] = getattr(item, name)
    parts = []
    if "ge" in bounds and "le" in bounds:
        parts.append(f"{bounds['ge']} to {bounds['le']}")
    elif "ge" in bounds:
        parts.append(f"at least {bounds['ge']}")
    elif "le" in bounds:
        parts.append(f"at most {bounds['le']}")
    if "gt" in bounds:
        parts.append(f"above {bounds['gt']}")
    if "lt" in bounds:
        parts.append(f"below {bounds['lt']}")
    if "min_length" in bounds:
        parts.append(f"at least {bounds['min_length']} item(s)")
    if "max_length" in bounds:
        parts.append(f"at most {bounds['max_length']} item(s)")
    return ", ".join(parts)


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return ""
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        return "" if isinstance(value, BaseModel) else f"`{json.dumps(value)}`"
    if field.default is None or field.default is PydanticUndefined:
        return ""
    return f"`{json.dumps(field.default)}`"


def key_of(name: str, field: FieldInfo) -> str:
    return field.alias or name


def declaration_order(model: type[BaseModel]) -> list[str]:
    """The model's fields, those it declares itself before those it inherits (a host's name and
    address before the keys it shares with a host class)."""
    own = [name for name in vars(model).get("__annotations__", {}) if name in model.model_fields]
    return own + [name for name in model.model_fields if name not in own]


def sections(
    model: type[BaseModel] = StackConfig, path: str = "", described: dict[type[BaseModel], str] | None = None
) -> Iterator[ModelSection]:
    """The model's own keys, then each nested model's, depth first, in declaration order; a model
    met again (a host class's kubelets are a host's) links to where it was described."""
    described = {} if described is None else described
    described.setdefault(model, path)
    rows = []
    nested: list[tuple[str, type[BaseModel]]] = []
    for name in declaration_order(model):
        field = model.model_fields[name]
        key = key_of(name, field)
        key_path = f"{path}.{key}" if path else key
        section = None
        inner = nested_model(field.annotation)
        if inner is not None:
            inner_model, suffix = inner
            key_path += suffix
            if inner_model not in described:
                nested.append((key_path, inner_model))
                described[inner_model] = key_path
            section = described[inner_model]
        rows.append(
            KeyRow(
                path=key_path,
                type=type_name(field.annotation, field.metadata),
                required=field.is_required(),
                default=default_text(field),
                constraints=constraints(field.annotation, field),
                description=field.description or "",
                section=section,
            )
        )
    yield ModelSection(path, model, tuple(rows))
    for key_path, inner_model in nested:
        yield from sections(inner_model, key_path, described)


def undescribed_fields(root: type[BaseModel] = StackConfig) -> list[str]:
    """Every `Model.field` under `root` without a description: the reference would have an empty row."""
    return sorted(
        {
            f"{section.model.__name__}.{name}"
            for section in sections(root)
            for name, field in section.model.model_fields.items()
            if not (field.description or "").strip()
        }
    )


def anchor(path: str) -> str:
    return "stack" if not path else path.replace("[]", "").replace("<name>", "name").replace(".", "-").lower()


def table_cell(text: str) -> str:
    """Text for one table cell: pipes escaped, and outside code spans `<` too (`numa<N>` is no HTML tag)."""
    parts = text.replace("\n", " ").split("`")
    prose = [part.replace("<", "&lt;") if index % 2 == 0 else part for index, part in enumerate(parts)]
    return "`".join(prose).replace("|", "\\|")


def _section_markdown(section: ModelSection) -> list[str]:
    title = f"`{NAMESPACE}:<key>`" if not section.path else f"`{section.path}`"
    lines = [
        f"## {title} {{#{anchor(section.path)}}}",
        "",
        "| key | type | required | default | constraints | description |",
        "|---|---|---|---|---|---|",
    ]
    for row in section.rows:
        type_cell = row.type
        if row.section is not None:
            type_cell = f"[{row.type}](#{anchor(row.section)})"
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{row.path}`",
                    table_cell(type_cell),
                    "yes" if row.required else "",
                    table_cell(row.default),
                    table_cell(row.constraints),
                    table_cell(row.description),
                ]
            )
            + " |"
        )
    return [*lines, ""]


def _owned_markdown() -> list[str]:
    lines = [
        "## `KubeletConfiguration` fields the program sets {#owned-kubelet-fields}",
        "",
        "Refused in every `kubeletConfig` layer, with what to use instead.",
        "",
        "| field | when | why, or what to use instead |",
        "|---|---|---|",
    ]
    for fields, when in ((OWNED, "always"), (OWNED_WITH_CLUSTER, "with `cluster`")):
        for path, why in fields.items():
            lines.append(f"| `{'.'.join(path)}` | {when} | {table_cell(why)} |")
    return [*lines, ""]


def configuration_reference(root: type[BaseModel] = StackConfig) -> str:
    """The Markdown of docs/reference/configuration.md; refused while a field has no description."""
    missing = undescribed_fields(root)
    if missing:
        raise ValueError(f"fields without a description: {', '.join(missing)}")
    all_sections = list(sections(root))
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python -m numa_kubelets.docgen` from numa_kubelets/config.py: edit the models' "
        "field descriptions, not this file. -->",
        "",
        f"Every key of the stack configuration (namespace `{NAMESPACE}` in `Pulumi.<stack>.yaml`). "
        "Unknown keys are refused at every level. How the values are checked together, how secrets are "
        "set and how the kubelets are tuned: [Configuring a stack](../configuration.md).",
        "",
    ]
    for section in all_sections:
        lines += _section_markdown(section)
    lines += _owned_markdown()
    return "\n".join(lines).rstrip() + "\n"
