"""Rich rendering of the core's plain data (summaries, tables). No logic lives here."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape

from nrl_k8s.redact import redact_text

from ._console import out


def _size(group: dict) -> str:
    parts = [f"{group[k]} {k}" for k in ("cpu", "memory") if group.get(k)]
    parts.append(f"{group['gpus']} GPU")
    return ", ".join(parts)


def _text_columns(header: tuple[str, ...], rows: list[tuple], indent: str) -> list[str]:
    """Left-aligned text columns two spaces apart (markup escaped), no trailing blanks."""
    cells = [tuple(str(c) for c in header)] + [tuple(str(c) for c in row) for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [indent + escape("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()) for row in cells]


def render_summary(s: dict) -> None:
    """Printed at once: one rich print of the whole page (a print per line costs ~10 ms per check)."""
    lines = ["[bold]nrl-k8s check[/]: config OK"]
    rows = [
        ("recipe", s["recipe"]),
        ("infra", s["infra"]),
        ("namespace", f"{s['namespace']} (from {s['namespace_source']})"),
        ("image", s["image"] or "(not set)"),
        ("rayjob", s["rayjob"]),
        ("run", "--raycluster (launch.mode: bringup)" if s["flow"] == "raycluster" else "--rayjob"),
        ("run id", s["run_id"]),
    ]
    lines += [f"  {label:<10} {escape(str(value))}" for label, value in rows]

    lines.append("\n[bold]TRAINING[/]")
    for role in s["roles"]:
        lines.append(f"  {role['role']}: {escape(role['name'])}  ({role['total_gpus']} GPU total)")
        lines.append(f"    head        {_size(role['head'])}")
        lines += [f"    {w['group']:<11} {w['replicas']} x ({_size(w)})" for w in role["workers"]]
        if role["code"]:
            lines.append(f"    code        {escape(role['code'])}  (run --raycluster)")
        lines += [f"    dra         {escape(obj)}" for obj in role["dra"]]
        if role["daemon"]:
            d = role["daemon"]
            lines.append(f"    daemon      {escape(str(d['entrypoint']))}")
            lines.append(f"                id {escape(d['submission_id'])}; code {escape(d['code'])}"
                         + (f"; health {escape(d['health'])}" if d["health"] else ""))
    lines.append(f"  entrypoint  {escape(str(s['entrypoint']))}")
    lines += [f"  env         {escape(key)}={escape(str(value))}" for key, value in s["env"].items()]

    if s["deployments"]:
        lines.append("\n[bold]DEPLOYMENTS[/]")
    for d in s["deployments"]:
        lines.append(f"  deployments.{escape(d['key'])} -> {escape(d['name'])}  (replicas {d['replicas']})")
        lines.append(f"    service     {escape(d['service'] or '(no container ports: none)')}")
        if d["health"]:
            lines.append(f"    health      {escape(d['health'])}")

    lines.append("\n[bold]DYNAMO[/]")
    if not s["dynamo"]:
        lines.append("  (no infra.dynamo entries)")
    for d in s["dynamo"]:
        lines.append(f"  dynamo.{escape(d['key'])} -> {escape(d['name'])}  (namespace {escape(d['namespace'])})")
        lines.append(f"    manifest       {escape(d['manifest'])}  ({d['api_version']})")
        lines.append(f"    ready timeout  {d['ready_timeout_s']}s")
        lines.append("    services:")
        services = [(svc["name"], svc["component_type"] or "-", svc["replicas"], svc["gpus"]) for svc in d["services"]]
        lines += _text_columns(("service", "type", "replicas", "GPUs/replica"), services, "      ")
    lines += [f"  recipe: {escape(note)}" for note in s["recipe_injection"]]

    if s["unused"]:
        lines.append("\n[bold]ACCEPTED BUT NOT USED[/] (no effect in this flow)")
        lines += [f"  - {escape(field)}" for field in s["unused"]]
    out.print("\n".join(lines))


def render_rows(rows: list[dict], columns: tuple[str, ...], *, empty: str) -> None:
    if not rows:
        out.print(empty, markup=False)
        return
    from rich.table import Table

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
    if s.get("driver"):
        d = s["driver"]
        out.print("\n[bold]DRIVER[/] (exec on the training head pod)")
        out.print(f"  {escape(d['run_id'])}  {d['status']}  {escape(d['detail'])}")
    job = s["rayjob"]
    out.print("\n[bold]RAYJOB[/]")
    if job is None:
        out.print("  (not found)")
    else:
        out.print(
            f"  {escape(job['name'])}  deployment={job['deployment_status'] or '-'}  job={job['job_status'] or '-'}"
            f"  id={escape(job['job_id'] or '-')}  cluster={escape(job['raycluster'] or '-')}"
        )
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
            if f["reachable"]:
                _render_fleet(f, d["rl"])
        if d["state"] != "not found":
            owners = ", ".join(d["owners"]) or "no owner: will not be cleaned up automatically"
            out.print(f"    owner     {escape(owners)}")
            out.print(f"    users     {escape(', '.join(d['users']) or '-')}")
    if s["waiting"]:
        out.print("\n[bold]WAITING[/] (pod groups not on a node yet, and why)")
        for w in s["waiting"]:
            pods = f"{w['pods']} pod{'s' if w['pods'] != 1 else ''}"
            out.print(f"  {escape(w['group'])} ({pods}): {escape(w['reason'])}")
    if s["left"]:
        out.print("\n[bold]LEFT BEHIND[/] (what each is, and how to remove it)")
        for item in s["left"]:
            out.print(f"  {escape(item['what'])}: {escape(item['reason'])}")
            out.print(f"    remove: {escape(item['remove'])}")


def _render_fleet(f: dict, rl: dict) -> None:
    """What a trainer binds to: the frontend's health and models, then one line per RL worker."""
    instances = f", rl instances: {', '.join(f['rl_instances'])}" if f["rl_instances"] else ""
    out.print(f"    health    {escape(str(f['health']))}  models: {escape(', '.join(f['models']) or '-')}"
              f"{escape(instances)}")
    out.print(f"    rl fleet  {escape(rl['detail'])}")
    for w in rl["workers"]:
        if w["error"]:
            out.print(f"      {escape(w['instance'])}  {escape(w['error'])}")
            continue
        version = w["weight_version"] if w["weight_version"] is not None else f"? ({w['detail']})"
        out.print(f"      {escape(w['instance'])}  {escape(w['system_url'])}  world_size={w['world_size']}  "
                  f"weight_version={escape(str(version))}  routes: {escape(', '.join(w['routes']) or '-')}")


def _dgd_rows(r) -> list[tuple[str, str]]:
    """A run's DGDs with their owners (either flow's result, ``flows.lifecycle.Outcome``)."""
    return [(f"dgd ({action})", f"{name}  owner: {', '.join(r.owners.get(name) or []) or 'none (kept after the run)'}")
            for name, action in r.dgds.items()]


def _end_rows(r) -> list[tuple[str, str]]:
    return [row for row in (("job status", r.job_status), ("record", r.record)) if row[1]]


def _print_rows(rows: list[tuple[str, str]], width: int) -> None:
    for label, value in rows:
        out.print(f"  {label:<{width}} {escape(str(value))}")


def render_run_result(r) -> None:
    out.print(f"\n[bold]run[/] {escape(r.rayjob)} in namespace {escape(r.namespace)}")
    rows = [("rayjob", r.rayjob), ("raycluster", r.raycluster or "-"), ("ray job id", r.job_id or "-"),
            *_dgd_rows(r)]
    if r.rescued:
        rows.append(("driver", "submitted by nrl-k8s (KubeRay never did)"))
    _print_rows(rows + _end_rows(r), 14)
    follow = f"nrl-k8s logs -f --run {Path(r.record).stem}   (or: " if r.record else "("
    out.print(f"  follow logs    {escape(follow)}kubectl -n {escape(r.namespace)} get rayjob {escape(r.rayjob)} -w)")
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
    rows = [
        (f"cluster {role}", f"{name} ({r.actions.get('kuberay.' + role, '-')})") for role, name in r.clusters.items()
    ]
    rows += _dgd_rows(r)
    rows += [(f"daemon {role}", what) for role, what in r.daemons.items()]
    if r.exec:
        rows.append(("driver", f"exec on head pod {r.exec['pod']}, files in {r.exec['dir']}"))
    else:
        rows.append(("code", f"{r.package or '-'}  ({r.uploaded_bytes} bytes uploaded)"))
    _print_rows(rows + _end_rows(r), 16)
    run = f"--run {r.run_id}"  # the hints work pasted after other runs
    out.print(f"  follow logs      nrl-k8s logs -f {escape(run)}        stop it: nrl-k8s job stop {escape(run)}")
