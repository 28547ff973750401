"""Rich rendering of the core's plain data (summaries, tables). No logic lives here."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from nrl_k8s.redact import redact_text

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
        ("run", "--raycluster (launch.mode: bringup)" if s["flow"] == "raycluster" else "--rayjob"),
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
        if role["code"]:
            out.print(f"    code        {escape(role['code'])}  (run --raycluster)")
        for obj in role["dra"]:
            out.print(f"    dra         {escape(obj)}")
        if role["daemon"]:
            d = role["daemon"]
            out.print(f"    daemon      {escape(str(d['entrypoint']))}")
            out.print(f"                id {escape(d['submission_id'])}; code {escape(d['code'])}"
                      + (f"; health {escape(d['health'])}" if d["health"] else ""))
    out.print(f"  entrypoint  {escape(str(s['entrypoint']))}")
    for key, value in s["env"].items():
        out.print(f"  env         {escape(key)}={escape(str(value))}")

    if s["deployments"]:
        out.print("\n[bold]DEPLOYMENTS[/]")
    for d in s["deployments"]:
        out.print(f"  deployments.{escape(d['key'])} -> {escape(d['name'])}  (replicas {d['replicas']})")
        out.print(f"    service     {escape(d['service'] or '(no container ports: none)')}")
        if d["health"]:
            out.print(f"    health      {escape(d['health'])}")

    out.print("\n[bold]DYNAMO[/]")
    if not s["dynamo"]:
        out.print("  (no infra.dynamo entries)")
    for d in s["dynamo"]:
        out.print(f"  dynamo.{escape(d['key'])} -> {escape(d['name'])}  (namespace {escape(d['namespace'])})")
        out.print(f"    manifest       {escape(d['manifest'])}  ({d['api_version']})")
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


def render_rows(rows: list[dict], columns: tuple[str, ...], *, empty: str) -> None:
    if not rows:
        out.print(empty, markup=False)
        return
    table = Table(box=None, padding=(0, 2))
    for col in columns:
        table.add_column(col.upper())
    for row in rows:
        table.add_row(*(escape(str(row.get(c, ""))) for c in columns))
    out.print(table)


def render_status(s: dict) -> None:
    out.print(f"[bold]namespace[/] {escape(s['namespace'])}")
    render_rows(
        [{**r, "cluster": r["cluster"] or "-"} for r in s["roles"]],
        ("role", "name", "cluster", "state", "head", "workers", "daemon"),
        empty="(no kuberay roles declared)",
    )
    job = s["rayjob"]
    out.print("\n[bold]RAYJOB[/]")
    if job is None:
        out.print("  (not found)")
    else:
        out.print(f"  {escape(job['name'])}  deployment={job['deployment_status'] or '-'}  job={job['job_status'] or '-'}"
                  f"  id={escape(job['job_id'] or '-')}  cluster={escape(job['raycluster'] or '-')}")
        out.print(f"  start={job['start'] or '-'}  end={job['end'] or '-'}  {escape(job['message'])}")
    out.print("\n[bold]DYNAMO[/]")
    if not s["dynamo"]:
        out.print("  (no infra.dynamo entries)")
    for d in s["dynamo"]:
        out.print(f"  dynamo.{escape(d['key'])}  {escape(d['name'])}  state={d['state']}")
        for svc in d["services"]:
            out.print(f"    {escape(svc['name']):<20} {svc['type'] or '-':<10} {svc['ready']}/{svc['desired']} ready")
        if d["frontend"]:
            f = d["frontend"]
            verdict = "reachable" if f["reachable"] else "not reachable"
            out.print(f"    frontend  {escape(f['address'])}  {verdict} ({escape(f['detail'])})")
        if d["state"] != "not found":
            owners = ", ".join(d["owners"]) or "no owner: will not be cleaned up automatically"
            out.print(f"    owner     {escape(owners)}")
            out.print(f"    users     {escape(', '.join(d['users']) or '-')}")
    if s["left"]:
        out.print("\n[bold]LEFT BEHIND[/] (nothing will remove these)")
        for item in s["left"]:
            out.print(f"  {escape(item['what'])}: {escape(item['reason'])}")
            out.print(f"    remove: {escape(item['remove'])}")


def render_run_result(r) -> None:
    out.print(f"\n[bold]run[/] {escape(r.rayjob)} in namespace {escape(r.namespace)}")
    rows = [("rayjob", r.rayjob), ("raycluster", r.raycluster or "-"), ("ray job id", r.job_id or "-")]
    for name, action in r.dgds.items():
        owners = ", ".join(r.owners.get(name) or []) or "no owner (kept after the run)"
        rows.append((f"dgd ({action})", f"{name}  owner: {owners}"))
    if r.rescued:
        rows.append(("driver", "submitted by nrl-k8s (KubeRay never did)"))
    if r.job_status:
        rows.append(("job status", r.job_status))
    for label, value in rows:
        out.print(f"  {label:<14} {escape(str(value))}")
    out.print(f"  follow logs    nrl-k8s logs RECIPE -f   (or: kubectl -n {r.namespace} get rayjob {r.rayjob} -w)")
    out.print(f"  tear down      kubectl -n {r.namespace} delete rayjob {r.rayjob}   (GC removes the cluster and DGDs)")


def render_probes(results) -> None:
    out.print("\n[bold]CLUSTER[/]")
    for r in results:
        mark = "[green]ok[/]  " if r.ok else "[yellow]WARN[/]" if r.warn else "[red]FAIL[/]"
        out.print(f"  {mark} {escape(r.name)}" + ("" if r.ok else f"  {escape(redact_text(r.detail))}"))
        if not r.ok and r.hint:
            out.print(f"         hint: {escape(redact_text(r.hint))}")


def render_longlived_result(r) -> None:
    out.print(f"\n[bold]run[/] {escape(r.run_id)} in namespace {escape(r.namespace)}")
    rows = [(f"cluster {role}", f"{name} ({r.actions.get('kuberay.' + role, '-')})") for role, name in r.clusters.items()]
    for name, action in r.dgds.items():
        rows.append((f"dgd ({action})", f"{name}  owner: {', '.join(r.owners.get(name) or []) or 'none'}"))
    rows += [(f"daemon {role}", what) for role, what in r.daemons.items()]
    rows.append(("code", f"{r.package or '-'}  ({r.uploaded_bytes} bytes uploaded)"))
    if r.job_status:
        rows.append(("job status", r.job_status))
    if r.record:
        rows.append(("record", r.record))
    for label, value in rows:
        out.print(f"  {label:<16} {escape(str(value))}")
    out.print("  follow logs      nrl-k8s logs -f        stop it: nrl-k8s job stop")
