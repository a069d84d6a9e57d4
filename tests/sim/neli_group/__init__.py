"""Group-level simulation of NELI: many members, each a real ``LeadershipTracker``, no broker.

What is checked, at every simulated step of 25 ms (``check_interval_ms``), in every schedule:

* **Exclusive mode (full and fast variants): at most one leader.** Never two running members
  whose own ``LeadershipTracker.leads(p, mono, wall)`` is true for the same partition at the same
  simulated instant. Checked twice per step: right after scheduled events (before any member has
  ticked its watchdog or processed a callback or record: the order least favourable to the
  stall guard) and after every member's step.
* **Non-exclusive mode: at least one leader,** except within a bounded window after a fault.
  While at least one member is alive and not leaving, every partition must be led by some
  running member at every step, unless some fault window covers the instant. A crash, a pause
  (of any length) or a cut of a member's coordinator link starting at ``t0`` covers
  ``[t0, t0 + W]``; a cut between a member and the NELI topic (produce or fetch) over
  ``[t0, t1]`` covers ``[t0, t1 + W]``, because the member keeps its assignment while it cannot
  see fresh heartbeats (``keep_leading_when_isolated`` helps only a member that was already
  leading); the group forming at start-up, or again after every member left, counts as a
  crash. A **broker stall** (for ``d``, the group coordinator answers nobody and expires
  nobody, and no heartbeat is appended or fetched: the one broker is paused) over
  ``[t0, t0 + d]`` covers ``[t0, t0 + d + W]`` in the random schedules; a directed test
  (``test_a_broker_stall_never_leaves_a_publisher_partition_unled``) checks the stricter claim
  for the publishers' default (``keep_leading_when_isolated``): a stall alone never leaves a
  partition unled, and neither does a second stall while the group re-forms after a first
  (``test_a_second_broker_stall_during_the_regrouping_leaves_no_partition_unled``, also with a
  coordinator that, resuming, expires the members before reading what they sent meanwhile,
  which a paused broker may do).
  ``W = S + L + 2·(S/4 + 3·rtt) + pulse + d_produce + d_fetch + 2·step`` (6160 ms with
  the publishers' shipped S = 3000 ms and pulse 1000 ms): session expiry, the client's
  loss-detection lag L, two cooperative rebalance rounds, then the new owner's first
  heartbeat.
  Joins and clean leaves (rolling restarts) are not faults: they must never leave a gap.

The assumptions the invariants depend on (the simulation enforces each, and
``test_a_frozen_monotonic_clock_needs_the_wall_clock_stall_guard`` shows that dropping the
frozen-clock one breaks exclusivity):

1. Wall clocks: every member's wall clock is within e/2 of true time, so any two differ by at
   most e; steps of the wall clock keep within that bound (exclusive mode: the full variant
   judges freshness by it, the fast variant ends a grace period early on the previous holder's
   heartbeat timestamps). Non-exclusive members are also given arbitrary wall-clock steps: they
   never judge leadership by the wall clock.
2. Monotonic clocks run at the true rate and **keep running while the process is paused** (in
   exclusive mode). A monotonic clock frozen across a pause longer than the stall limit hides the
   pause from the stall guard and from the client's session timer; the member then leads on a
   stale assignment. Non-exclusive schedules include frozen pauses.
3. Timing: exclusive T + e < S (enforced by ``NeliConfig``), non-exclusive T > S; the client's
   group heartbeat interval is S/4; a rebalance round takes at most a heartbeat interval plus
   three round trips (rtt ≤ 40 ms) unless a member is paused or cut off, in which case the
   coordinator waits at most S for it.
4. The client declares its session lost at most L = 250 ms after S without a successful
   heartbeat response (librdkafka's session timer), and only heartbeat responses and its own
   (re)joins restart that timer. Coordinator links are TCP: a cut delays messages until it
   heals, in order; a heartbeat answered "unknown member" makes the client rejoin.
5. Heartbeat records reach the log within 60 ms and a consumer within 60 ms more; a new owner
   reads from the group's committed position (the owner's consumer commits every second,
   accepted only from the member the coordinator assigns the partition to, outside a
   rebalance: its read position, or in fast exclusive mode the position of its own latest
   heartbeat read, if any), else from the end of the log; the record timestamp is the sender's
   wall clock (CreateTime).
6. A paused member does not act: leadership is checked only for running members, and a
   member's first query after a pause may come before anything else it does (see above).
7. Leadership is asked right before acting (``neli``'s "When leadership ends"); the checks
   bound when ``leads()`` is true, not how long an action takes afterwards.
8. A broker stall stops the coordinator's clock for sessions with it: a coordinator that was
   paused, or one that takes the group over after a move, does not expire a member for the
   time it could not hear it (Kafka's new coordinator starts every member's session afresh
   when it loads the group). Members' own clocks run on through the stall, so their session
   timers and heartbeat views see it (assumption 4).

The default test run tries 100 schedules per scenario; the slow suite (``scripts/slow-tests``)
tries the next 2,000 (``NELI_SIM_SLOW_SCHEDULES``). Run more with
``NELI_SIM_SCHEDULES=20000 .venv/bin/pytest tests/sim/neli_group`` (per scenario; ``NELI_SIM_SEED``
shifts the seeds). A failing schedule is shrunk and printed with a command that
replays it: ``python -m tests.sim.neli_group.replay SCENARIO SEED '[Event(...), ...]' [-v]``.
"""
