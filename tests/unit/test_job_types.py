"""The job registry (lcm/job_types.py) is the only declaration of a job.

Every Celery task is a registered job type and every job type has its task;
the outbox's job kinds, Celery's routes and beat's schedule all read it; no
task name is written out anywhere else; and importing the worker side
configures nothing and loops nowhere.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path
from typing import get_args

from lcm.job_types import BEAT, JOB_TYPES, PASS_JOBS, QUEUES
from lcm.outbox import Job
from lcm.settings import Settings
from workers.celery_app import app, beat_schedule

ROOT = Path(__file__).resolve().parents[2]
NAMES = {job.name for job in JOB_TYPES}


def _registered_tasks() -> set[str]:
    app.loader.import_default_modules()  # the includes, as a worker imports them
    return {name for name in app.tasks if not name.startswith("celery.")}


def test_every_task_is_a_registered_job_type_and_back() -> None:
    assert len(NAMES) == len(JOB_TYPES)  # no name declared twice
    assert _registered_tasks() == NAMES


def test_each_outbox_job_kind_names_a_registered_type_its_task_accepts() -> None:
    _registered_tasks()
    samples = {"conversation_id": 7, "file_id": "file_abc"}
    for kind in get_args(Job):
        assert kind.job_type in JOB_TYPES, kind
        fields = inspect.signature(kind).parameters
        job = kind(**{name: samples[name] for name in fields})
        task = app.tasks[kind.job_type.name]
        inspect.signature(task.run).bind(*job.args())  # raises on a mismatch


def test_celery_routes_each_job_to_its_declared_queue() -> None:
    for job in JOB_TYPES:
        assert job.queue in QUEUES
        assert app.amqp.router.route({}, job.name)["queue"].name == job.queue, job.name
    assert set(PASS_JOBS.values()) <= set(JOB_TYPES)


def test_beat_schedules_registered_jobs_on_their_queues() -> None:
    sqlite = beat_schedule(Settings(database_url="sqlite:////tmp/x.db", semantic=True))
    postgres = beat_schedule(Settings(database_url="postgresql://u@localhost/lcm"))
    assert set(sqlite) == {periodic.entry for periodic in BEAT}
    # Semantic recall's backfill runs only where it is on (LCM_SEMANTIC).
    assert set(sqlite) - set(postgres) == {"search-index-backlog", "semantic-backfill"}
    jobs = {job.name: job for job in JOB_TYPES}
    for entry in sqlite.values():
        assert entry["options"]["queue"] == jobs[entry["task"]].queue


def test_no_task_name_is_written_outside_the_registry() -> None:
    written = []
    for package in ("lcm", "api", "workers", "cli"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "lcm" / "job_types.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value in NAMES:
                    written.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert written == [], "name these through lcm.job_types:\n" + "\n".join(written)


def _workers_imports() -> dict[str, set[str]]:
    """Each module under workers/ and the workers modules it imports (anywhere in it)."""
    modules = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
        for path in (ROOT / "workers").rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found |= {name for name in names if name in modules and name != "workers"}
        graph[module] = found - {module}
    return graph


def test_workers_modules_import_each_other_without_a_loop() -> None:
    graph = _workers_imports()
    assert "workers.runtime" in graph["workers.tasks.compaction"]  # the walk sees imports
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        assert module not in path, "import loop: " + " -> ".join([*path, module])
        if module not in done:
            for imported in sorted(graph[module]):
                visit(imported, [*path, module])
            done.add(module)

    for module in sorted(graph):
        visit(module, [])


def test_importing_the_worker_side_configures_nothing() -> None:
    # A fresh interpreter: this one may have bootstrapped already.
    probe = (
        "import workers.embedded, workers.sender, workers.tasks.compaction;"
        "from workers import runtime; from workers.celery_app import app;"
        "print(runtime.configured(), app.conf.broker_url, sorted(app.conf.beat_schedule))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "None", "[]"]
