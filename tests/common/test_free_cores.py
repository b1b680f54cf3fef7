"""The free-core counter (``longformer_common.free_cores``) on fake /proc trees: the other
processes' work is the allowed CPUs' busy ticks minus this process's own, a core counts as taken
at half a core, and a missing /proc means every core is free. Nothing here is timed."""
import os

from longformer_common import free_cores

HEADER = "cpu  0 0 0 0 0 0 0 0 0 0\n"


def _cpu_line(cpu: int, busy: int, idle: int, iowait: int = 0) -> str:
    # user nice system idle iowait irq softirq steal guest guest_nice: busy split over user and system
    return f"cpu{cpu} {busy - busy // 2} 0 {busy // 2} {idle} {iowait} 0 0 0 0 0\n"


def _proc(root, cpus, own_ticks: int):
    """A fake /proc under ``root``: cpus = {id: (busy, idle)}; this process used ``own_ticks``."""
    os.makedirs(os.path.join(root, "self"), exist_ok=True)
    with open(os.path.join(root, "stat"), "w") as stat:
        stat.write(HEADER + "".join(_cpu_line(c, b, i) for c, (b, i) in cpus.items()) + "intr 1 2 3\nctxt 9\n")
    # pid (comm with spaces) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
    utime, stime = own_ticks - own_ticks // 3, own_ticks // 3
    with open(os.path.join(root, "self", "stat"), "w") as stat:
        stat.write(f"4242 (python x) S 1 1 1 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 3 0 1 2 3\n")
    return free_cores.sample(str(root))


def test_a_sample_reads_each_cpu_and_this_process(tmp_path):
    sample = _proc(tmp_path, {0: (30, 70), 1: (5, 90)}, own_ticks=12)
    assert sample.cpus == {0: (30, 100), 1: (5, 95)}
    assert sample.own == 12


def test_one_core_kept_busy_by_another_process_leaves_one_free(tmp_path):
    before = _proc(tmp_path / "a", {0: (0, 0), 1: (0, 0)}, own_ticks=0)
    # 100 ticks per CPU: another process fills cpu0, this process used 30 ticks on cpu1
    after = _proc(tmp_path / "b", {0: (100, 0), 1: (30, 70)}, own_ticks=30)
    assert free_cores.free_between(before, after, {0, 1}) == 1


def test_this_process_own_work_does_not_take_cores(tmp_path):
    before = _proc(tmp_path / "a", {0: (0, 0), 1: (0, 0)}, own_ticks=0)
    # both CPUs full, all of it this process's own threads: both cores are ours to use
    after = _proc(tmp_path / "b", {0: (100, 0), 1: (100, 0)}, own_ticks=200)
    assert free_cores.free_between(before, after, {0, 1}) == 2


def test_a_core_counts_as_taken_from_half_of_it(tmp_path):
    before = _proc(tmp_path / "a", {0: (0, 0), 1: (0, 0), 2: (0, 0), 3: (0, 0)}, own_ticks=0)
    light = _proc(tmp_path / "b", {0: (40, 60), 1: (0, 100), 2: (0, 100), 3: (0, 100)}, own_ticks=0)
    heavy = _proc(tmp_path / "c", {0: (60, 40), 1: (0, 100), 2: (0, 100), 3: (0, 100)}, own_ticks=0)
    assert free_cores.free_between(before, light, {0, 1, 2, 3}) == 4
    assert free_cores.free_between(before, heavy, {0, 1, 2, 3}) == 3


def test_only_the_allowed_cpus_count(tmp_path):
    before = _proc(tmp_path / "a", {0: (0, 0), 1: (0, 0), 2: (0, 0)}, own_ticks=0)
    after = _proc(tmp_path / "b", {0: (100, 0), 1: (0, 100), 2: (0, 100)}, own_ticks=0)
    assert free_cores.free_between(before, after, {1, 2}) == 2  # cpu0's busy work is outside our affinity
    assert free_cores.free_between(before, after, {0, 1, 2}) == 2


def test_never_fewer_than_one(tmp_path):
    before = _proc(tmp_path / "a", {0: (0, 0), 1: (0, 0)}, own_ticks=0)
    after = _proc(tmp_path / "b", {0: (100, 0), 1: (100, 0)}, own_ticks=0)
    assert free_cores.free_between(before, after, {0, 1}) == 1


def test_iowait_counts_as_idle(tmp_path):
    before = _proc(tmp_path / "a", {0: (0, 0), 1: (0, 0)}, own_ticks=0)
    os.makedirs(tmp_path / "b" / "self")
    (tmp_path / "b" / "stat").write_text(HEADER + _cpu_line(0, 0, 10, iowait=90) + _cpu_line(1, 0, 100))
    (tmp_path / "b" / "self" / "stat").write_text("1 (p) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0\n")
    after = free_cores.sample(str(tmp_path / "b"))
    assert free_cores.free_between(before, after, {0, 1}) == 2  # a CPU waiting on a disk is not taken


def test_cpus_missing_from_proc_are_not_counted(tmp_path):
    before = _proc(tmp_path / "a", {0: (0, 0)}, own_ticks=0)
    after = _proc(tmp_path / "b", {0: (0, 100)}, own_ticks=0)
    assert free_cores.free_between(before, after, {0, 1}) == 1  # cpu1 absent from /proc/stat: only cpu0 known


def test_without_proc_every_allowed_core_is_free(tmp_path):
    assert free_cores.sample(str(tmp_path / "missing")) is None
    assert free_cores.free_cores(interval=0, proc=str(tmp_path / "missing")) == len(free_cores.allowed_cores())
    assert free_cores.free_between(None, None, {0, 1, 2}) == 3


def test_no_time_between_samples_says_all_free(tmp_path):
    same = _proc(tmp_path, {0: (50, 50), 1: (50, 50)}, own_ticks=0)
    assert free_cores.free_between(same, same, {0, 1}) == 2
