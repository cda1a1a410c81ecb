"""The run's queue of tests, shared by the slots' pulling processes."""

from __future__ import annotations

import math
import threading
from collections import Counter, deque
from typing import NamedTuple

from tracker.records import file_of
from tracker.runner.share import function_of


class Filling(NamedTuple):
    """A group that fills its device, in a device's chain."""

    seconds: float  # expected
    tests: list[str]
    presumed: bool  # only presumed to fill, for want of evidence
    place: int  # in suite order
    untried: bool = False  # no warm night compared it with and without company


class Feed:
    """The run's tests, handed out one group at a time (a test, or a whole file with the suite's
    `group = "file"`) to whichever process asks first.

    The first `ranked` groups are ranked by expected duration and go out from the head, longest
    first (LPT; but a kernel's, a test function's, cases go to the slot that began it, and to
    another only when it has nothing else left: `_mine`; a slot goes on with the kernel, then
    the file, of its last one, in suite order, once the longest left could no longer set the
    run's end: `_same_file`; and on a cold night, once
    half a device's slots run long tests, the shortest left: `_crowded`), spread over the
    devices: a slot takes the next long test only while its device's running long tests are
    expected to end no later than another device's. While short tests are left, a device runs
    one long test beside them, its chain's lane included (none when that would leave it no
    slot for them, `_room`), and more only once the next one must
    start for the run to end on time: the expected work handed out so far, per slot, plus the
    test's time reaches the run's ideal length (all the expected work / the slots). So the
    short tests, most of a suite's tests and a small part of its time, are done first on nearly
    every slot, and the long ones still end with them (on a GPU, long tests on half the slots
    left 2,000 short ones waiting for three minutes: bench/README.md). The short tests go out
    in suite order, in stretches: a slot carries on with the group after its last one while no
    one else has taken it, so a file's tests share one process's module fixtures and compiled
    kernels instead of each process compiling every kernel (a kernel's next case comes before a
    chain's lane: `_same_kernel`). A slot that needs a new place starts at the longest free
    stretch, at the file (else kernel) boundary nearest its middle when another slot is already
    heading into it (xdist's worksteal, one test at a time: `_split`).

    Ranked groups that fill a device (`fills`, from `share.learn`) do not go out that way: they form
    one chain per device, balanced by expected time (longest to the least loaded device), and a
    device runs one of them at a time while short tests are left, if it keeps a slot for them. Then
    a chain of presumed ones too long for the run gets more lanes (`_chain`), and a slot with
    nothing else to do takes one beyond them (`_spare`). An untried kernel's first case goes
    first, beside the short tests (`_to_compare`); its others wait for a lane while a case of it
    runs on its device (`_trying`), unless a slot has nothing else to do. A device whose chain
    is done takes the longest test left in another device's chain. Within a chain, files begin
    shortest first (their tests take turns on the device, so that finishes the most tests by any
    time without ending later), a file's tests go out in suite order, and a slot keeps to the
    files it began and begins one that no other slot has while there is one (`_pick`): a file's
    kernels are then compiled in one process, in the order the suite's authors run them.
    """

    def __init__(self, devices: dict[str, str] | None = None, warm: bool = True) -> None:
        self.device = devices or {}  # each taker's device ("" for all when not given)
        self.warm = warm  # False: the kernel cache is empty, long tests compile (`_crowded`)
        self.slots = Counter(self.device.values())  # takers per device
        self.running = dict.fromkeys(self.device.values() or [""], 0.0)  # long work per device
        self.holding: dict[str, float] = {}  # the expected seconds of a taker's long group
        self.long = dict.fromkeys(self.running, 0)  # long groups running per device
        self.groups: list[list[str]] = []
        self.weights: list[float] = []  # each group's expected seconds
        self.ranked = 0
        self.span = float("inf")  # the run's ideal length: expected seconds / slots
        self.handed = 0.0  # the expected seconds of the groups handed out
        self.free: list[bool] = []
        self.short_free = 0
        self.filled = False  # the first process to collect the suite fills it
        self.head = 0  # no free group before it
        self.after: dict[str, int] = {}  # where each taker's stretch carries on
        self.current: dict[str, deque[str]] = {}
        self.returned: deque[deque[str]] = deque()
        self.chains: dict[str, list[Filling]] = {}  # device -> its filling groups
        self.filling: dict[str, str] = {}  # taker -> the device whose filling lane it holds
        self.trying: dict[str, tuple[str, str]] = {}  # taker -> (device, kernel) of its untried
        self.tried: set[str] = set()  # kernels of which an untried case went out tonight
        self.lanes: dict[str, int] = {}  # device -> filling groups it runs at once
        self.began: dict[str, str] = {}  # file -> the taker that began its filling groups
        self.places: list[int] = []  # each ranked group's place in suite order
        self.last_file: dict[str, str] = {}  # taker -> the file of its last ranked group
        self.owner: dict[str, str] = {}  # kernel (test function) -> the taker of its ranked cases
        self.closed = False  # no test goes out any more
        self.lock = threading.Lock()

    def fill(
        self,
        groups: list[list[str]],
        ranked: int | None = None,
        weights: list[float] | None = None,
        fills: list[bool] | None = None,
        presumed: list[bool] | None = None,
        places: list[int] | None = None,
        untried: list[bool] | None = None,
    ) -> None:
        """`weights`: the groups' expected seconds (the ranked ones at least; missing ones
        count as 0); `fills`: which of the ranked groups fill a device; `presumed`: of which
        only presumed to, for want of evidence; `places`: the ranked groups' places in suite
        order (their order here, when not given); `untried`: of the filling ones, those no warm
        night has compared with and without company."""
        with self.lock:
            groups = [list(g) for g in groups if g]
            ranked = len(groups) if ranked is None else ranked
            weights = [*(weights or [1.0] * ranked), *[0.0] * len(groups)][: len(groups)]
            fills = fills or [False] * ranked
            if self.device:
                self.span = sum(weights) / len(self.device)
            presumed = presumed or [False] * ranked
            places = places or list(range(ranked))
            untried = untried or [False] * ranked
            filling = [Filling(weights[i], groups[i], presumed[i], places[i], untried[i])
                       for i in range(ranked) if fills[i]]  # fmt: skip
            self._chain(filling)
            keep = [i for i in range(len(groups)) if i >= ranked or not fills[i]]
            self.groups = [groups[i] for i in keep]
            self.ranked = sum(1 for i in keep if i < ranked)
            self.places = [places[i] for i in keep if i < ranked]
            self.weights = [weights[i] for i in keep]
            self.free = [True] * len(self.groups)
            self.short_free = len(self.groups) - self.ranked
            self.filled = True

    def _chain(self, filling: list[Filling]) -> None:
        """Deal the filling groups to per-device chains. A chain that holds presumed ones and
        is longer than the run's ideal length runs in as many lanes as make it fit, up to half
        its device's slots: 78 presumed tests made a 591 s chain on one GPU, and letting them
        all loose instead made 6 heavy kernels take turns for minutes (bench/README.md)."""
        devices = sorted(set(self.device.values())) or [""]
        load = dict.fromkeys(devices, 0.0)
        self.chains = {d: [] for d in devices}
        guessing: set[str] = set()
        for group in sorted(filling, key=lambda g: -g.seconds):
            device = min(devices, key=lambda d: load[d])
            load[device] += group.seconds
            self.chains[device].append(group)
            if group.presumed:
                guessing.add(device)
        for device, chain in self.chains.items():
            chain.sort(key=lambda g: g.seconds, reverse=True)  # shortest at the end
            fit = math.ceil(load[device] / self.span) if device in guessing and self.span else 1
            self.lanes[device] = max(1, min(fit, self.slots[device] // 2))

    def _next_filling(self, taker: str) -> Filling | None:
        """The taker's device's next filling group, if a lane is free: from its own chain
        (`_pick`), else (done, or only untried cases of kernels it runs left) the longest left
        in the chain with the most work left."""
        device = self.device.get(taker, "")
        if not self._lane_free(device):
            return None
        chain = self.chains.get(device)
        if chain and (own := self._to_compare(chain) or self._pick(chain, taker)):
            return own
        donors = [c for c in self.chains.values() if any(not self._trying(g, device) for g in c)]
        if not donors:
            return None
        chain = max(donors, key=lambda c: sum(g.seconds for g in c))
        return chain.pop(next(k for k, g in enumerate(chain) if not self._trying(g, device)))

    def _to_compare(self, chain: list[Filling]) -> Filling | None:
        """While short tests are left, the first case in suite order of an untried kernel none of
        whose cases went out tonight: beside light work, it gets the little company that its
        cases beside the heavy ones can be compared with (`share.learn`), so the next night's
        model knows how the kernel shares. In the chain's usual order (files shortest first)
        the heaviest kernels go last, when short tests are gone and every slot takes one at
        once: fused_moe's cases had 6.4-7.1 tests of company in every warm night of one H200,
        so they stayed `untried`, presumed to fill, night after night (calls CQ-CR,
        bench/README.md). On the device it is not enough (call CU): sent out with the night's
        first test, the case still had 5.9 tests of company, the filling cases under the ranking
        floor that go with the short tests, so it compared nothing."""
        if not self.short_free:
            return None
        fresh = [k for k, g in enumerate(chain)
                 if g.untried and function_of(g.tests[0]) not in self.tried]  # fmt: skip
        return chain.pop(min(fresh, key=lambda k: chain[k].place)) if fresh else None

    def _pick(self, chain: list[Filling], taker: str, spare: bool = False) -> Filling | None:
        """The next group of `chain` (with `spare`, any, beyond the lanes; else an untried one only
        while no case of its kernel runs on the device), in suite order, from a file the taker
        began, else from the file no one began with the shortest group, else from any. A cold GPU
        night's chain spread over every slot had each process compile each file's kernels: its 24
        dyt cases took 690 s of slot time, against 306 s in one xdist worker, where 8 of them took
        0.0 s once the file's earlier cases had compiled them (bench/README.md, call V). Suite order
        within a file, because a suite may depend on it: test_mlp's float32 cases ran out of shared
        memory only in a process that had run the same shape in bfloat16 before, 10 of them on a
        night that took the file shortest first (call X). Files by their time per test instead
        (Smith's rule) finished more by 60-120 s, but put test_mlp's chain after its ranked bfloat16
        cases had run in the same processes: 9 such failures against 2 (call AD)."""
        best: dict[int, str] = {}  # 0: the taker's file, 1: no one's, 2: another's -> file
        device = self.device.get(taker, "")

        def fits(g: Filling) -> bool:
            return spare or not self._trying(g, device)

        for k in range(len(chain) - 1, -1, -1):  # sorted longest first: shortest at the end
            if not fits(chain[k]):
                continue
            file = file_of(chain[k].tests[0])
            owner = self.began.get(file)
            best.setdefault(0 if owner == taker else 1 if owner is None else 2, file)
            if 0 in best:
                break
        if not best:
            return None
        file = best[min(best)]
        same = [k for k, g in enumerate(chain) if file_of(g.tests[0]) == file and fits(g)]
        picked = chain.pop(min(same, key=lambda k: chain[k].place))
        self.began.setdefault(file, taker)
        return picked

    def _lane_free(self, device: str) -> bool:
        """One lane while short tests are left (they are most of the tests, done first) and
        the device keeps a slot for them, then the device's lanes."""
        taken = self._chained(device)
        if self.short_free:
            return not taken and self._room(device)
        return taken < self.lanes.get(device, 1)

    def _room(self, device: str) -> bool:
        """Whether the device's long work (ranked and chained) leaves a slot for the short
        tests, besides the one that asks. Long work beside short tests needs a slot for them:
        on one GPU with one slot, long tests first held the short ones back all night (call
        V's plan: 65 tests finished by 10 minutes, suite order 773), and with two slots a
        chained and a ranked long test took both."""
        if not self.device:  # takers not known: nothing to keep
            return True
        return self.long[device] + self._chained(device) < self.slots[device] - 1

    def _chained(self, device: str) -> int:
        """The device's filling lanes taken."""
        return list(self.filling.values()).count(device)

    def _spare(self, taker: str) -> Filling | None:
        """For a slot with nothing else left: a filling group beyond the lanes (`_pick`'s), from
        its device's chain, else another's. A slot left idle while a group waits for a lane is
        sure to lose time (140 tests waited so at a night's limit on one GPU: bench/README). Any
        group, not only those presumed to fill: on one H200 the heavy tests take strict turns,
        k at once each at 1/k of the device or a little better (calls BF-BH), so which groups hold
        the device decides how many finish by each minute. Spared only presumed ones, a warm night
        ran five fused_moe cases beyond the lanes from 129-153 s, 196-260 s each, while 24 dyt
        cases shown to fill, 28-34 s each in their turns, went through two lanes until the run's
        limit cut the last three (call BP, bench/README). A spare holds no lane: counted in
        them, such groups kept every lane taken, and the tests shown to fill never got one (18
        falconh1mlp cases of call O's night were never started: bench/README)."""
        own = self.device.get(taker, "")
        for device in sorted(self.chains, key=lambda d: d != own):
            if (picked := self._pick(self.chains[device], taker, spare=True)) is not None:
                return picked
        return None

    def _trying(self, group: Filling, device: str) -> bool:
        """Whether the group is untried and a case of its kernel (its test function) runs on the
        device: cases of one kernel need the same of it, so an untried one waits for a lane
        until the other is done. Let loose, the untried heavy cases of warm GPU nights started 3
        to 7 at once (5 of fused_moe's test_correctness in one), took turns until the run's
        limit cut them all, and slowed every test beside them (calls AO, AR and AS); one lane
        for all untried tests instead, replayed with AR's times, finished 2,454 tests by 240 s
        against 2,577 (bench/README.md). A slot with nothing else to do takes one anyway,
        beyond the lanes (`_spare`): waiting also beyond them, the 12 cases of fused_moe's
        test_correctness ran one after another through a whole warm night while 4 of its 8
        slots were idle for 270 s, and 8 cases never started; xdist ran 6-7 of them at once, 2-4x
        slower each, and finished all but one (calls BA and BB)."""
        return group.untried and (device, function_of(group.tests[0])) in self.trying.values()

    def take(self, taker: str) -> str | None:
        with self.lock:
            if self.closed:
                return None
            group = self.current.get(taker)
            if not group:
                self._release(taker)
                group = self._next_group(taker)
                if group is None:
                    return None
                self.current[taker] = group
            return group.popleft()

    def _release(self, taker: str) -> None:
        if taker in self.holding:
            device = self.device.get(taker, "")
            self.running[device] -= self.holding.pop(taker)
            self.long[device] -= 1
        self.filling.pop(taker, None)
        self.trying.pop(taker, None)

    def _next_group(self, taker: str) -> deque[str] | None:
        if self.returned:
            return self.returned.popleft()
        device = self.device.get(taker, "")
        carry = self._same_kernel(taker)
        if carry is None and (chained := self._next_filling(taker)) is not None:
            self.filling[taker] = device
            return self._hand(taker, chained)
        while self.head < len(self.groups) and not self.free[self.head]:
            self.head += 1
        if self.head == len(self.groups):
            if (spare := self._spare(taker)) is None:
                return None
            return self._hand(taker, spare)  # beyond the lanes: it holds none of them
        if carry is not None:
            i = carry
        elif mine := self._mine(taker) if self._long_next(device) else []:  # (a hot path)
            i = mine[-1] if self._crowded(device) else self._same_file(taker, mine)
        elif self.head < self.ranked and not self.short_free:
            i = self._steal()
        else:
            i = self._carry_on(taker)
            if i is None:
                i = self._stretch()
        self.free[i] = False
        self.handed += self.weights[i]
        if i < self.ranked:
            self.last_file[taker] = file_of(self.groups[i][0])
            self.owner.setdefault(function_of(self.groups[i][0]), taker)
            self.holding[taker] = self.weights[i]
            self.running[device] += self.weights[i]
            self.long[device] += 1
        else:
            self.short_free -= 1
        self.after[taker] = i + 1
        return deque(self.groups[i])

    def _long_next(self, device: str) -> bool:
        """Whether the device's next group is a long one: when no short test is left, else
        when the device's long work is no more than another's, it is not crowded, and one is
        due."""
        if self.head >= self.ranked:
            return False
        if not self.short_free:
            return True
        spread = self.running[device] <= min(self.running.values())
        return spread and not self._crowded(device) and self._due(device)

    def _same_kernel(self, taker: str) -> int | None:
        """The short group after the taker's last one, if free and of the same kernel (test
        function): the taker goes on with it before it takes a chain's lane, which another slot
        can take. A process tunes each kernel it runs once: on one H200 (call BD) a slot left
        test_mlp's llamamlp after its float32 cases for a lane, and two others took its bfloat16
        and float16 cases, tuning each of the three shapes again, 45-63 s and 25-28 s a case
        beside 7 long tests, where xdist's one worker took 0.1-1.0 s a case once its float32
        cases had tuned them (call BE)."""
        i = self._carry_on(taker)
        if i is None or i == self.ranked:  # its last group was no short one
            return None
        return i if function_of(self.groups[i][0]) == function_of(self.groups[i - 1][0]) else None

    def _carry_on(self, taker: str) -> int | None:
        """The short group after the taker's last one, if free: where its stretch goes on."""
        i = self.after.get(taker, -1)
        return i if self.ranked <= i < len(self.groups) and self.free[i] else None

    def _hand(self, taker: str, group: Filling) -> deque[str]:
        self.handed += group.seconds
        if group.untried:
            self.trying[taker] = (self.device.get(taker, ""), function_of(group.tests[0]))
            self.tried.add(function_of(group.tests[0]))
        return deque(group.tests)

    def _mine(self, taker: str) -> list[int]:
        """The free long groups the taker may take, longest first: those of kernels (test
        functions) no other slot has begun, since a process compiles and tunes a kernel once.
        On the CPU proxy of in-process compiling (4 files of 8 long tests, each file's kernel
        compiled by its first test in each process), cold nights took 19.4 s with every slot
        compiling most kernels, and 13.4 s so (xdist: 14.1 s; bench/README.md)."""
        return [i for i in range(self.head, self.ranked)
                if self.free[i] and self._owner(i) in (None, taker)]  # fmt: skip

    def _owner(self, i: int) -> str | None:
        """The taker that began the kernel of ranked group `i`, if one has."""
        return self.owner.get(function_of(self.groups[i][0]))

    def _steal(self) -> int:
        """With no short test and no kernel of its own left, a slot takes the last case, in
        suite order, of the kernel with the most expected work left (xdist's worksteal)."""
        left: Counter[str] = Counter()
        for i in range(self.head, self.ranked):
            if self.free[i]:
                left[function_of(self.groups[i][0])] += self.weights[i]
        kernel = max(left, key=left.__getitem__)
        same = [i for i in range(self.head, self.ranked)
                if self.free[i] and function_of(self.groups[i][0]) == kernel]  # fmt: skip
        return max(same, key=lambda i: self.places[i])

    def _same_file(self, taker: str, mine: list[int]) -> int:
        """The next long group to go out, of those the taker may take (`_mine`): the longest
        while it could set the run's end (a quarter of its ideal length or more), else the
        next in suite order of the kernels the taker began, then of the file its last long group
        came from, while that has any. A cold night compiles a file's kernels in each process that
        runs its tests: test_mlp's long cases, handed out longest first over 8 processes, took
        792 s in all against 411 s the night before, when most ran in suite order in 2
        processes of a chain (call AH; xdist: 531 s). The bound keeps LPT where it matters: a
        test that could set the end is never held back for a file's next case."""
        file = self.last_file.get(taker)
        if file is None or 4 * self.weights[mine[0]] >= self.span:
            return mine[0]
        for same in (
            [i for i in mine if self._owner(i) == taker],
            [i for i in mine if file_of(self.groups[i][0]) == file],
        ):
            if same:
                return min(same, key=lambda i: self.places[i])
        return mine[0]

    def _crowded(self, device: str) -> bool:
        """On a cold night, whether half the device's slots already run long tests: the next
        slot then takes the short tests left, else the shortest long one. A cold night's
        expected times are 1.3-3.5x off, so pacing let 7 of 8 slots start long tests within
        20 s once the short ones were handed out (each compiling its kernels, 222 s): the 15
        shorter long tests still waiting were never run and the night stalled at 2,574 tests
        from 360 to 480 s (call AK; xdist, with at most 3 such tests at once, 2,594 by 420 s).
        The next night finished 2,588 by 360 s (call AL). The price: the last test ends later
        (40-120 s in replay), and a suite that never fills the cache is cold every night, so
        the CPU proxy of in-process compiling took 19 s instead of 13 (bench/README.md)."""
        if self.warm or not self.device:
            return False
        return self.long[device] >= max(1, self.slots[device] // 2)

    def _due(self, device: str) -> bool:
        """Whether the next long group goes out now, while short tests are left: at once when
        the device runs no long work, its chain's lane included, and keeps a slot for the short
        ones (`_room`), otherwise once it must start for the run to end on time. Beside a
        chain's lane, a long test of unknown sharing went out at once too: 2 of 4 slots on the
        device from the start, 138 tests by 4 s against xdist's 255 (bench/README.md, CPU)."""
        idle = not self.long[device] and not self._chained(device)
        if not self.device or (idle and self._room(device)):
            return True
        return self.handed / len(self.device) + self.weights[self.head] >= self.span

    def _stretch(self) -> int:
        """Where a slot starts anew among the short tests: the longest run of free groups."""
        first = max(self.head, self.ranked)
        best_start, best_len, start = first, 0, None
        for i in range(first, len(self.groups) + 1):
            if i < len(self.groups) and self.free[i]:
                start = i if start is None else start
                continue
            if start is not None and i - start > best_len:
                best_start, best_len = start, i - start
            start = None
        if best_start not in self.after.values():
            return best_start
        return self._split(best_start, best_start + best_len)

    def _split(self, start: int, end: int) -> int:
        """Where a slot joins a stretch another slot is heading into: at the file boundary
        nearest its middle, else the kernel (test function) boundary, else in its middle
        (xdist's worksteal). A process compiles and tunes each kernel it runs once: split
        mid-kernel, 7 processes of a warm GPU night each tuned test_mlp's kernels again, 949 s
        of slot time for its cases against 151 s in xdist's 1-2 workers (call AV); split at its
        test functions, which share the kernels (and left by a slot for a lane: `_same_kernel`),
        its cases ran in 7 processes, 650 s against 250 s in xdist's 3 (call BD)."""
        middle = start + (end - start) // 2
        for unit in (file_of, function_of):
            names = [unit(self.groups[i][0]) for i in range(start, end)]
            edges = [i for i in range(start + 1, end) if names[i - start] != names[i - start - 1]]
            if edges:
                return min(edges, key=lambda i: abs(i - middle))
        return middle

    def give_back(self, taker: str, nodeids: list[str]) -> None:
        """Tests handed to a process that ended before running them go first, with the rest
        of that slot's group."""
        with self.lock:
            self._release(taker)
            rest = [*nodeids, *self.current.pop(taker, ())]
            if rest:
                self.returned.appendleft(deque(rest))

    def close(self) -> bool:
        """Hand out nothing more (the rest of the run is for reruns); whether any test was left."""
        with self.lock:
            self.closed = True
            return bool(
                not self.filled
                or self.returned
                or any(self.current.values())
                or any(self.free[self.head :])
                or any(self.chains.values())
            )

    def pending(self, taker: str) -> bool:
        """Work this taker could still be handed (all of it, until the suite is collected)."""
        with self.lock:
            if self.closed:
                return False
            if not self.filled:
                return True
            return bool(
                self.returned
                or self.current.get(taker)
                or any(self.free[self.head :])
                or any(self.chains.values())  # beyond the lanes, if nothing else (`_spare`)
            )
