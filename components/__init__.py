"""Pulumi shell: components that turn the plan into resources. No decisions live here."""
