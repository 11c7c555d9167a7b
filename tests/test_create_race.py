"""Issue 48, case 11: processes creating one table at the same moment; exactly one wins."""

from __future__ import annotations

import multiprocessing
import queue

import pytest

import labformat as lf
from labformat import properties as P

CREATORS = 3
ROUNDS = {"local": 12, "s3": 6}
TABLE_FILES = sorted([P.PROPERTIES_PATH, P.BACKUP_PATH])


def _create_each_round(uris: list[str], storage_options: dict, record_key: str, start, outcomes) -> None:
    """A creator process: each round, waits at the barrier with the others, then creates the round's table.
    No Spark session: `Table.create` needs none, and the race is then only the storage's."""
    for number, uri in enumerate(uris):
        start.wait(timeout=60)
        try:
            table = lf.Table.create(None, uri, record_key=record_key, storage_options=storage_options or None)
            outcome = f"won {table.record_key}"
        except lf.TableExistsError:
            outcome = "TableExistsError"
        except Exception as exc:  # noqa: BLE001 - what went wrong is the test's answer
            outcome = f"{type(exc).__name__}: {exc}"
        outcomes.put((number, record_key, outcome))


def test_creators_racing_for_one_table_exactly_one_wins(home):
    """Each round, CREATORS processes create the same table with different record keys at once: one
    wins and the table is its (properties and backup), the others get TableExistsError, and no temp
    file stays behind."""
    rounds = ROUNDS["s3" if home.storage_options else "local"]
    names = [f"t{n}" for n in range(rounds)]
    context = multiprocessing.get_context("spawn")
    start, outcomes = context.Barrier(CREATORS), context.Queue()
    creators = [context.Process(target=_create_each_round,
                                args=([home.uri(n) for n in names], home.storage_options, f"key{i}", start, outcomes))
                for i in range(CREATORS)]
    for creator in creators:
        creator.start()
    results: dict[int, dict[str, str]] = {}
    try:
        for _ in range(rounds * CREATORS):
            number, key, outcome = outcomes.get(timeout=120)
            results.setdefault(number, {})[key] = outcome
    except queue.Empty:
        pytest.fail(f"the creators stopped answering; so far {results}")
    finally:
        for creator in creators:
            creator.join(timeout=30)
            if creator.is_alive():
                creator.kill()
    for number, name in enumerate(names):
        by_key = results[number]
        winners = [key for key, outcome in by_key.items() if outcome.startswith("won")]
        assert len(winners) == 1, (number, by_key)
        assert sorted(by_key.values()) == sorted([f"won {winners[0]}"] + ["TableExistsError"] * (CREATORS - 1)), by_key
        opened = lf.Table.open(None, home.uri(name), storage_options=home.storage_options or None)
        assert opened.record_key == winners[0]
        assert sorted(home.files(name)) == TABLE_FILES
        storage = home.storage(name)
        assert storage.read_bytes(P.PROPERTIES_PATH) == storage.read_bytes(P.BACKUP_PATH)
