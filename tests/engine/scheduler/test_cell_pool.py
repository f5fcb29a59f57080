"""The shared KV pool's rules (engine/scheduler/cell_pool.py), one test per rule."""

from __future__ import annotations

import pytest

from engine.scheduler.cell_pool import PoolUse, Room, admits, make_room


def test_pool_use_free_counts_active_and_cached_cells() -> None:
    use = PoolUse(1000, {0: 300, 1: 200}, ((2, 100), (3, 50)))
    assert use.held_cells == 500
    assert use.cached_cells == 150
    assert use.free == 350


def test_pool_use_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        PoolUse(0)
    with pytest.raises(ValueError):
        PoolUse(10, {0: -1})


# -- admission by cells --------------------------------------------------------------------


def test_admission_counts_cached_prefixes_as_free() -> None:
    # 900 cells hold cached prefixes, yet a 900-cell prompt may start: they are evicted for it.
    use = PoolUse(1000, {0: 100}, ((1, 600), (2, 300)))
    assert admits(use, 900)
    assert not admits(use, 901)


def test_admission_reserves_the_prompts_still_being_read() -> None:
    use = PoolUse(1000, {0: 100})
    assert admits(use, 500, promised=400)
    assert not admits(use, 500, promised=401)


# -- eviction before refusal ---------------------------------------------------------------


def test_no_eviction_while_free_cells_suffice() -> None:
    use = PoolUse(1000, {0: 100}, ((1, 300),))
    assert make_room(use, 512, {0: 1}) == Room(512)


def test_eviction_takes_least_recently_used_prefixes_first_and_only_as_many_as_needed() -> None:
    # 100 free; a 512-row batch needs 412 more: the LRU prefix (300) then the next (200).
    use = PoolUse(1000, {0: 100}, ((5, 300), (6, 200), (7, 300)))
    room = make_room(use, 512, {})
    assert room.evict == (5, 6)
    assert room.fail == ()
    assert room.capacity == 512


def test_eviction_comes_before_any_failure() -> None:
    use = PoolUse(100, {0: 60, 1: 30}, ((2, 10),))
    room = make_room(use, 2, {0: 1, 1: 1})
    assert room == Room(2, evict=(2,))


# -- prefill waits, decode goes first --------------------------------------------------------


def test_without_cached_prefixes_the_batch_is_cut_to_the_free_cells() -> None:
    # Decoders need 2 rows; 40 are free; the prompt rows beyond them wait.
    use = PoolUse(1000, {0: 500, 1: 300, 2: 160})
    room = make_room(use, 300, {0: 1, 1: 1})
    assert room == Room(40)


# -- outgrowing fails alone -----------------------------------------------------------------


def test_a_full_pool_fails_the_largest_holder_alone() -> None:
    use = PoolUse(1000, {0: 500, 1: 300, 2: 200})
    room = make_room(use, 3, {0: 1, 1: 1, 2: 1})
    assert room.fail == (0,)
    assert room.capacity == 3  # its 500 cells freed: the other two decode, within the rest


def test_ties_fail_the_higher_sequence_id() -> None:
    use = PoolUse(100, {0: 50, 1: 50})
    assert make_room(use, 2, {0: 1, 1: 1}).fail == (1,)


def test_prompts_stuck_on_a_full_pool_free_it_by_failing_the_largest() -> None:
    # Nobody decodes, every cell is held by prompts still being read: one makes way.
    use = PoolUse(100, {0: 70, 1: 30})
    room = make_room(use, 64, {})
    assert room.fail == (0,)
    assert room.capacity == 64


def test_failing_stops_once_the_decode_rows_fit() -> None:
    use = PoolUse(1000, {0: 400, 1: 350, 2: 250})
    room = make_room(use, 3, {0: 1, 1: 1, 2: 1})
    assert room.fail == (0,)
