"""A lookup through the scheduler over real Spark, as a walk in rounds (server/reads/lookups.py,
dataflow/upquery.py): its misses come back as data, each round resumes where the last one
stopped, and the fill leaves the answer's wire form ready for the next hit. Counted through
probes: the dataflow lock's count of holds by the looking-up thread (`ViewState.count_locks`)
and the lookup's trace (`LookupTrace`: rounds, node visits, fetches)."""

from __future__ import annotations

from pomoview.server.reads.lookups import LookupTrace
from pomoview.server.scheduler.scheduler import Scheduler

from .vote_program import VOTES, row


def test_a_cold_lookup_of_the_vote_view_takes_the_dataflow_lock_twice(scheduler: Scheduler) -> None:
    """One round names the article and the vote fetches (the join keys are the asked key),
    Spark answers them without the lock, the second round fills and answers: two holds.
    The upquery pins take a lock of their own."""
    s = scheduler
    s.install(VOTES)
    epoch = s.write([
        ("article", [row(id=1, title="a"), row(id=2, title="b")], []),
        ("vote", [row(article_id=1, user_id=u) for u in range(5)], []),
    ])
    s.flush()  # the rows come from Parquet, through the Spark jobs
    s.lookup("articleWithVotes", [row(id=2)], min_epoch=epoch)  # builds the reader: not cold any more
    trace = LookupTrace()
    with s.view_state.count_locks() as held:
        results, _ = s.lookup("articleWithVotes", [row(id=1)], trace=trace)
    assert results == [[{"id": 1, "title": "a", "votes": 5}]]
    assert trace.rounds == 2 and trace.fetches == 2, trace
    assert held.count <= 2, held.count


def chain(n: int) -> str:
    sources = "\n".join(f"source s{i}(a: int, b: int)." for i in range(n))
    body = ", ".join(f"s{i}(a: X{i}, b: X{i + 1})" for i in range(n))
    return f"{sources}\nview v(a).\nv(a: X0, b: X{n}) :- {body}.\n"


def test_a_chain_of_dependent_joins_takes_n_plus_one_rounds_and_linear_visits(scheduler: Scheduler) -> None:
    """Each join's other side is named only by the previous join's answer: n + 1 rounds of
    Spark jobs, and every node's step started about once over all of them."""
    n = 12
    s = scheduler
    s.install(chain(n))
    s.write([(f"s{i}", [row(a=i, b=i + 1), row(a=i + 50, b=i + 51)], []) for i in range(n)])
    s.flush()
    trace = LookupTrace()
    with s.view_state.count_locks() as held:
        results, _ = s.lookup("v", [row(a=0)], trace=trace)
    assert results == [[{"a": 0, "b": n}]]
    assert trace.rounds <= n + 1, trace
    nodes = len(s.dataflow_nodes("v"))
    assert trace.steps <= 2 * nodes, (trace, nodes)
    assert held.count == trace.rounds  # one hold a round, none for the pins


def tree_of_intersections(sources: int) -> str:
    """The issue's wide case: `xy` intersects `sources` sources on `z` through a tree of rules
    four levels deep, each body joining three to five relations."""
    decls = [f"source s{i}(z: int)." for i in range(sources)]
    rules: list[str] = []
    level = [f"s{i}" for i in range(sources)]
    depth = 0
    while len(level) > 1:
        size = 5 if len(level) % 5 == 0 else 4 if len(level) % 4 == 0 else 3 if len(level) % 3 == 0 else 2
        nxt = []
        for start in range(0, len(level), size):
            name = f"r{depth}_{start // size}"
            body = ", ".join(f"{rel}(z: Z)" for rel in level[start:start + size])
            rules.append(f"{name}(z: Z) :- {body}.")
            nxt.append(name)
        level, depth = nxt, depth + 1
    rules.append(f"xy(z: Z) :- {level[0]}(z: Z).")
    return "\n".join([*decls, "view xy(z).", *rules]) + "\n"


def test_a_view_over_120_sources_in_a_tree_of_rules_answers(scheduler: Scheduler) -> None:
    """It answered `UNAVAILABLE: the upquery for 'xy' did not settle in 64 rounds`."""
    s = scheduler
    program = tree_of_intersections(120)
    assert program.count(":-") >= 30 + 1
    s.install(program)
    s.write([(f"s{i}", [row(z=1), row(z=2 + i % 3)], []) for i in range(120)])
    s.flush()
    trace = LookupTrace()
    results, _ = s.lookup("xy", [row(z=1), row(z=2)], trace=trace)
    # Oracle: z is in xy when every source holds it.
    held = [{1, 2 + i % 3} for i in range(120)]
    assert results == [[{"z": z}] if all(z in h for h in held) else [] for z in (1, 2)]
    assert trace.rounds == 2, trace  # every join asks both sides by z: one round names all fetches


def test_the_first_hit_after_a_miss_encodes_nothing(scheduler: Scheduler) -> None:
    s = scheduler
    s.install(VOTES)
    epoch = s.write([("article", [row(id=1, title="a")], []), ("vote", [row(article_id=1, user_id=7)], [])])
    encoded: list[list[tuple[object, ...]]] = []

    def encode(rows: list[tuple[object, ...]]) -> bytes:
        encoded.append(rows)
        return repr(sorted(rows)).encode()

    answer, _ = s.lookup_encoded(
        "articleWithVotes", [row(id=1)], min_epoch=epoch, encoder=lambda program, view: encode
    )
    assert answer == [repr([(1, "a", 1)]).encode()] and len(encoded) == 1
    hit = s.hits("articleWithVotes", [row(id=1)], None, encode)
    assert hit is not None and hit[0] == answer
    assert len(encoded) == 1  # the fill's encoding served the hit
