"""Shared fixtures: a tiny random DiffusionGemma (real model class, real tokenizer) and its engine, and real Redis."""

from __future__ import annotations

import os

import pytest
import torch

from hypothesis import settings as hypothesis_settings

from tests.policies.helpers import REDIS_URL, PrivateRedis, delete_prefix, redis_client, unique_prefix

# Property tests: in CI a fixed, derandomized run (the same examples every time, no database), so a
# red build replays and a green one means the same thing twice; elsewhere random examples, with
# failures kept in the local .hypothesis/ database and replayed first on the next run. Loaded here,
# before any test module builds its @settings, which inherit the profile's database and derandomize.
# HYPOTHESIS_PROFILE=ci|dev picks one explicitly.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
hypothesis_settings.register_profile("dev", print_blob=True)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))

# The suite runs on two pytest-xdist workers (scripts/test.sh); a group of tests runs whole on one
# worker, in file order. Every test that starts a Ray cluster (tests/agents, app, cluster, hardening, layouts)
# is in one group, so clusters start one at a time as in a serial run: two starting at once race for
# ports and overrun Ray's 30 s node start-up on a busy 2-core machine (measured). That group also
# keeps their ordering: agents' in-process app is stopped at the end of its package, before
# tests/app starts its own (a process holds one Ray connection), and tests/hardening's soak kills
# parts of the app that later tests inspect. Every other file is a group of its own, so a module's
# costly fixture (a compiled engine) is built once. The groups are made by a scheduler of our own
# rather than `xdist_group` marks: `--dist loadgroup` stopped grouping on pytest 9.2 (its test ids
# are no longer rewritten: pytest-dev/pytest-xdist#1386).
RAY_CLUSTER_DIRS = ("tests/agents/", "tests/app/", "tests/cluster/", "tests/gemma/", "tests/hardening/", "tests/layouts/")
RAY_GROUP = "ray-clusters"
# Files in those folders whose tests start no cluster and use no app (the chaos report's rows, `tandem
# doctor`, the Serve configs' validation): groups of their own, so they run beside the Ray group instead
# of waiting in it. `pytest_collection_modifyitems` refuses one that takes a cluster fixture.
NO_CLUSTER_FILES = ("tests/hardening/test_chaos_rows.py", "tests/hardening/test_doctor.py", "tests/hardening/test_serve_configs.py")
CLUSTER_FIXTURES = {"serve_app", "hardened_app", "slow_app", "shared_app", "agents_app", "cluster"}


def worker_group(nodeid: str) -> str:
    """The worker group of a test: "ray-clusters" or its file."""
    path = nodeid.split("::", 1)[0]
    return RAY_GROUP if nodeid.startswith(RAY_CLUSTER_DIRS) and path not in NO_CLUSTER_FILES else path


# The groups are handed out longest first, so that the run does not end on one worker with a long
# group while the other waits (measured: xdist's own order, by number of tests, left the one-test
# GPU-script dry runs and the retraining module for last, ~110 s of one worker alone). Longest is
# known from the tests' `slow` marks (pyproject: "takes more than a few seconds"): the Ray group
# first, then every file with a slow test, then the rest by number of tests (as xdist orders them).
def group_rank(group: str, items: list) -> tuple[int, int]:
    if group == RAY_GROUP:
        return (0, 0)
    if any(item.get_closest_marker("slow") for item in items):
        return (1, 0)
    return (2, -len(items))


# TANDEM_TEST_SHUFFLE=<seed>: the files of each directory, and the tests of each file, in a random order
# drawn from that seed, to show that no test depends on what another left behind or on running after
# it (issue 56: the soak ran last only because its file name sorted last). Directories keep their
# order (the Ray group's packages start and stop their apps in turn) and a file's tests stay together
# (a module's fixture, such as the soak, is built once). `pytest_report_header` prints the seed.
SHUFFLE_SEED = os.environ.get("TANDEM_TEST_SHUFFLE")


def shuffled(items: list, seed: str) -> list:
    """`items` with each directory's files, and each file's tests, in an order drawn from `seed`."""
    import random

    draw = random.Random(seed)
    by_dir: dict[str, dict[str, list]] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        by_dir.setdefault(path.rsplit("/", 1)[0], {}).setdefault(path, []).append(item)
    out = []
    for files in by_dir.values():
        order = list(files.values())
        draw.shuffle(order)
        for tests in order:
            draw.shuffle(tests)
            out.extend(tests)
    return out


def pytest_report_header(config):
    return f"tests shuffled: TANDEM_TEST_SHUFFLE={SHUFFLE_SEED}" if SHUFFLE_SEED else None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.split("::", 1)[0] in NO_CLUSTER_FILES and CLUSTER_FIXTURES & set(item.fixturenames):
            raise pytest.UsageError(f"{item.nodeid} uses a Ray cluster: take its file out of NO_CLUSTER_FILES (tests/conftest.py)")
    if SHUFFLE_SEED:
        items[:] = shuffled(items, SHUFFLE_SEED)
    groups: dict[str, list] = {}
    for item in items:
        groups.setdefault(worker_group(item.nodeid), []).append(item)
    ranked = sorted(groups.items(), key=lambda group: group_rank(*group))  # stable: file order within a rank
    items[:] = [item for _, group_items in ranked for item in group_items]


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    config.option.loadscopereorder = False  # keep pytest_collection_modifyitems' order
    return ByGroup(config, log)


# The Ray group is the suite's longest and its tests time things (deadlines, rows freed within
# seconds, log lines), so the other worker yields to it: a worker nices itself the first time it
# runs a test outside that group (its children too: compile workers, scripts). It still gets every
# cycle the Ray tests leave while they wait on apps and HTTP, which is most of them.
# Nice 5 (CFS weight 335 against the Ray processes' 1024): a quarter of a contended core, so
# the compile tests' own time limits still hold while the soak keeps both cores busy.
YIELDING_NICENESS = 5
_yielding = False


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    global _yielding
    if not _yielding and hasattr(item.config, "workerinput") and worker_group(item.nodeid) != "ray-clusters":
        _yielding = True
        os.nice(YIELDING_NICENESS)


# Tiny models gain nothing from intra-op threads, and spinning OpenMP threads on a busy 2-core
# machine made decode 20-40x slower in measurements here.
torch.set_num_threads(int(os.environ.get("TANDEM_TEST_THREADS", "1")))


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    from lab.model.tiny import save_tiny_checkpoint

    return save_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "ckpt", seed=0, canvas_length=32)


@pytest.fixture(scope="session")
def engine(tiny_checkpoint):
    from engines import DiffusionEngine

    # TANDEM_TEST_COMPILE=on runs every engine test on compiled model calls (engines/batch/compiled.py)
    return DiffusionEngine.from_checkpoint(tiny_checkpoint, compile=os.environ.get("TANDEM_TEST_COMPILE", "off"))


@pytest.fixture(scope="module")
def eager_model(tiny_checkpoint):
    """The tiny model eager (the reference layout), whatever TANDEM_TEST_COMPILE sets the session's engine to."""
    from engines import DiffusionEngine

    return DiffusionEngine.from_checkpoint(tiny_checkpoint, compile="off").model


@pytest.fixture
def inference():
    """As the decode loops run (`@torch.inference_mode()` on ar.py's, block.py's, verified.py's): no autograd,
    which the slot cache's in-place merges refuse. Tests of batch internals use it (`usefixtures`)."""
    with torch.inference_mode():
        yield


@pytest.fixture
def drafts_anywhere(monkeypatch):
    """Verified mode drafts whatever AR's doubt. A row alone drafts only where AR is sure of its next
    token (engines.modes.verified_drafting.SURE_ENTROPY), and the random model is unsure of every token (its
    entropy is near log V), so without this it would never draft: tests of drafting on it use this."""
    import engines.modes.verified

    monkeypatch.setattr(engines.modes.verified, "SURE_ENTROPY", float("inf"))


# ---- Redis (real; tests fail, not skip, without it) ------------------------------------------------
@pytest.fixture
def redis_url() -> str:
    redis_client().close()  # fail, not skip, without Redis
    return REDIS_URL


@pytest.fixture
def prefix(redis_url):
    """A key prefix no other test uses; its keys are deleted afterwards."""
    p = unique_prefix()
    yield p
    client = redis_client()
    delete_prefix(client, p)
    client.close()


@pytest.fixture
def private_redis():
    server = PrivateRedis()
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def gemma3_checkpoint():
    """The embedded default, Gemma 3 270M imported from its registry package (once per machine, into
    $TANDEM_HOME: the first run takes ~2.5 minutes here), loaded in fp32."""
    from engines.model.gemma3_import import import_gemma3
    from engines.model.loading import load_checkpoint

    return load_checkpoint(import_gemma3())
