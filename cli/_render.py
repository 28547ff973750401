"""Rich rendering of the core's plain data (summaries, tables). No logic lives here."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from ._console import out


def _size(group: dict) -> str:
    parts = [f"{group[k]} {k}" for k in ("cpu", "memory") if group.get(k)]
    parts.append(f"{group['gpus']} GPU")
    return ", ".join(parts)


def render_summary(s: dict) -> None:
    out.print("[bold]nrl-k8s check[/]: config OK")
    rows = [
        ("recipe", s["recipe"]),
        ("infra", s["infra"]),
        ("namespace", f"{s['namespace']} (from {s['namespace_source']})"),
        ("image", s["image"] or "(not set)"),
        ("rayjob", s["rayjob"]),
        ("run id", s["run_id"]),
    ]
    for label, value in rows:
        out.print(f"  {label:<10} {escape(str(value))}")

    out.print("\n[bold]TRAINING[/]")
    for role in s["roles"]:
        out.print(f"  {role['role']}: {escape(role['name'])}  ({role['total_gpus']} GPU total)")
        out.print(f"    head        {_size(role['head'])}")
        for w in role["workers"]:
            out.print(f"    {w['group']:<11} {w['replicas']} x ({_size(w)})")
    out.print(f"  entrypoint  {escape(str(s['entrypoint']))}")
    for key, value in s["env"].items():
        out.print(f"  env         {escape(key)}={escape(str(value))}")

    out.print("\n[bold]DYNAMO[/]")
    if not s["dynamo"]:
        out.print("  (no infra.dynamo entries)")
    for d in s["dynamo"]:
        out.print(f"  dynamo.{escape(d['key'])} -> {escape(d['name'])}  (namespace {escape(d['namespace'])})")
        out.print(f"    manifest       {escape(d['manifest'])}")
        out.print(f"    ready timeout  {d['ready_timeout_s']}s")
        table = Table(box=None, padding=(0, 2), show_edge=False)
        for col in ("service", "type", "replicas", "GPUs/replica"):
            table.add_column(col)
        for svc in d["services"]:
            table.add_row(svc["name"], svc["component_type"] or "-", str(svc["replicas"]), str(svc["gpus"]))
        out.print("    services:")
        out.print(table, style=None)
    for note in s["recipe_injection"]:
        out.print(f"  recipe: {escape(note)}")

    if s["unused"]:
        out.print("\n[bold]ACCEPTED BUT NOT USED[/] (no effect in this flow)")
        for field in s["unused"]:
            out.print(f"  - {escape(field)}")
