// Package remote is the numa-kubelets test double of pulumi-command 1.2.1's
// command:remote:Command. Its schema and behaviour are the real plugin's, read from its
// published schema and v1.2.1 source as facts (no code of it is used):
//
//   - any change of an input but `triggers` runs `update`, or `create` when there is no
//     `update`, keeping the previous stdout/stderr until the run replaces them; a change of
//     `triggers` replaces the resource (the framework's replaceOnChanges);
//   - `delete` runs with the inputs and outputs of the state being deleted;
//   - a preview runs nothing;
//   - the id is the resource name and 8 random hex digits.
package remote

import (
	"context"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
)

// Command runs shell commands on a remote host over SSH as its lifecycle steps.
type Command struct{}

func (c *Command) Annotate(a infer.Annotator) {
	a.Describe(&c, "A command run over SSH on create, update and delete (numa-kubelets test double).")
}

// CommandArgs are the inputs, with the real plugin's names and tags.
type CommandArgs struct {
	Triggers               *[]any            `pulumi:"triggers,optional"               provider:"replaceOnChanges"`
	Create                 *string           `pulumi:"create,optional"`
	Update                 *string           `pulumi:"update,optional"`
	Delete                 *string           `pulumi:"delete,optional"`
	Stdin                  *string           `pulumi:"stdin,optional"`
	Logging                *Logging          `pulumi:"logging,optional"`
	Connection             *Connection       `pulumi:"connection"                      provider:"secret"`
	Environment            map[string]string `pulumi:"environment,optional"`
	AddPreviousOutputInEnv *bool             `pulumi:"addPreviousOutputInEnv,optional"`
}

// CommandState is what the state keeps: the inputs (so that `delete` runs with them) and the
// output of the last successful run.
type CommandState struct {
	CommandArgs
	Stdout string `pulumi:"stdout"`
	Stderr string `pulumi:"stderr"`
}

// Logging says which of the command's streams go to the engine's log as they come.
type Logging string

func (Logging) Values() []infer.EnumValue[Logging] {
	return []infer.EnumValue[Logging]{
		{Name: "stdout", Value: "stdout", Description: "Capture stdout in logs but not stderr"},
		{Name: "stderr", Value: "stderr", Description: "Capture stderr in logs but not stdout"},
		{Name: "stdoutAndStderr", Value: "stdoutAndStderr", Description: "Capture stdout and stderr in logs"},
		{Name: "none", Value: "none", Description: "Capture no logs"},
	}
}

// logs says whether stream ("stdout" or "stderr") is logged: both are, unless set otherwise.
func (l *Logging) logs(stream string) bool {
	return l == nil || string(*l) == stream || *l == "stdoutAndStderr"
}

func (*Command) Create(ctx context.Context, req infer.CreateRequest[CommandArgs]) (infer.CreateResponse[CommandState], error) {
	state := CommandState{CommandArgs: req.Inputs}
	id, err := resource.NewUniqueHex(req.Name, 8, 0)
	if err != nil || req.DryRun || req.Inputs.Create == nil {
		return infer.CreateResponse[CommandState]{ID: id, Output: state}, err
	}
	err = state.run(ctx, *req.Inputs.Create)
	return infer.CreateResponse[CommandState]{ID: id, Output: state}, err
}

func (*Command) Update(
	ctx context.Context, req infer.UpdateRequest[CommandArgs, CommandState],
) (infer.UpdateResponse[CommandState], error) {
	state := CommandState{CommandArgs: req.Inputs, Stdout: req.State.Stdout, Stderr: req.State.Stderr}
	if req.DryRun {
		return infer.UpdateResponse[CommandState]{Output: state}, nil
	}
	var err error
	if req.Inputs.Update != nil {
		err = state.run(ctx, *req.Inputs.Update)
	} else if req.Inputs.Create != nil {
		err = state.run(ctx, *req.Inputs.Create)
	}
	return infer.UpdateResponse[CommandState]{Output: state}, err
}

func (*Command) Delete(ctx context.Context, req infer.DeleteRequest[CommandState]) (infer.DeleteResponse, error) {
	if req.State.Delete == nil {
		return infer.DeleteResponse{}, nil
	}
	return infer.DeleteResponse{}, req.State.run(ctx, *req.State.Delete)
}
