# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host split in two, decided in whole tenants on both parts at once (a bound and a guess of
the placement search, placement/search.py). Pure, deterministic, standard library only.

The split bound (placement/search_bounds.py, ``_split_bound``) lets a tenant that fits both parts
count on each. Here the smaller part (the nodes few tenants may go to: on the DGX A100-class host
the four nodes without GPUs, where only the tenants without GPUs or VFs go) is decided exactly:
the sets of its tenants that fit there together, each of them one to which no tenant left out
could still be added. For each such set ``M`` the other part gets the tenants that may go there
and are not in ``M``, and its own search (a search of those nodes alone) says how many of them it
holds. Every placement puts some set ``P`` of the small part's tenants there, and ``P`` lies in
one of the sets ``M``; the other part then holds no more of the tenants not in ``P`` than of
those not in ``M`` plus the tenants of ``M`` not in ``P`` (each one more tenant adds at most one
placed), so a placement places at most ``|M|`` plus what the other part holds without ``M``.
The largest of these over the sets is an upper bound (the small part's demands are each tenant's
least there and explicit GPUs are not checked there: more sets fit, never fewer). Where a set
and the other part's own search together place more than the best found, that is a plan.

Only the sets that could place more than the best found are looked at (``|M|`` plus what the
other part holds with every tenant above it), and the walk and the searches of the other part
stop at their steps and nodes (then nothing is said).
"""

from __future__ import absolute_import, division, print_function

from operator import ge, sub

__metaclass__ = type

# the most tenants the small part may have (its sets are walked one tenant at a time)
PARTS_MOST = 16
# the walk over the small part's sets: the most steps
PARTS_STEPS = 40000
# the other part's searches: the most nodes of each, and of all of them together
PART_NODES = 3000
PARTS_NODES = 8000


def small_part_sets(tenants, caps, classes, least, limit):
    """The sets of the small part's tenants that fit there together, each with at least ``least``
    tenants and no tenant left out that still fits in the room it leaves. ``tenants``: [(kind,
    {slot: demand})] (a kind: tenants alike, of which the walk takes the first ones: leaving one
    out leaves the later ones of its kind out too); ``caps``: room per slot (the part's slots
    only); ``classes``: per slot, its class (slots of one class and the same room left are tried
    once). -> ([[(tenant index, slot)]], steps) or (None, steps) past ``limit`` steps."""
    found = {}
    steps = [0]
    size = len(tenants)
    rooms = dict((slot, tuple(cap)) for slot, cap in caps.items())

    def walk(index, chosen, out, left_kinds):
        steps[0] += 1
        if steps[0] > limit:
            return False
        if len(chosen) + size - index < least:
            return True
        if index == size:
            for number in out:
                for slot, demand in tenants[number][1].items():
                    if all(map(ge, rooms[slot], demand)):
                        return True  # not the largest: the set with it added is walked too
            key = tuple(sorted(tenants[number][0] for number, _slot in chosen))
            if key not in found:
                found[key] = list(chosen)
            return True
        kind, demands = tenants[index]
        if kind not in left_kinds:
            tried = set()
            for slot in sorted(demands):
                demand = demands[slot]
                room = rooms[slot]
                state = (classes[slot], room, demand)
                if state in tried or not all(map(ge, room, demand)):
                    continue
                tried.add(state)
                rooms[slot] = tuple(map(sub, room, demand))
                chosen.append((index, slot))
                going = walk(index + 1, chosen, out, left_kinds)
                chosen.pop()
                rooms[slot] = room
                if not going:
                    return False
        out.append(index)
        going = walk(index + 1, chosen, out, left_kinds | {kind})
        out.pop()
        return going

    if not walk(0, [], [], frozenset()):
        return None, steps[0]
    return sorted(found.values(), key=lambda chosen: (-len(chosen), chosen)), steps[0]


def by_parts(search, candidate, small, large, target):
    """The host of ``search`` (placement_search.Search at its root) split into the node slots of
    the bit masks ``small`` and ``large`` (all of them, no slot in both), the small part decided
    in whole tenants. ``candidate``: the Candidate class. -> (``target``, None): no placement
    places more than ``target`` tenants; (None, plan): a plan that places more, [(queue
    position, slot)] (the small part's tenants on the slots of their set, the large part's as its
    own search placed them); None: neither (a set may place more and its search found no such
    plan, or the walk or the searches ran out of steps or nodes, or the small part has more than
    PARTS_MOST tenants). The search nodes of the large part's searches are added to
    ``search.nodes``."""
    fitting = search._fitting(0)  # pylint: disable=protected-access
    if fitting is None:
        return None
    members, where, _bits = fitting
    queue = search.queue
    tenants, small_positions = [], []
    kinds = {}
    for number, its in zip(members, where):
        if its & small:
            demands = {}
            for slot, demand in queue[number].fits:
                if small >> slot & 1 and its >> slot & 1:
                    demands[slot] = tuple(map(min, demands.get(slot, demand), demand))
            # alike: the same ways to take every node, online or not, explicit GPUs or not
            item = queue[number]
            key = (tuple(item.options), item.online, item.claims, its)
            tenants.append((kinds.setdefault(key, len(kinds)), demands))
            small_positions.append(number)
    if not tenants or len(tenants) > PARTS_MOST:
        return None
    large_tenants = [(number, its & large) for number, its in zip(members, where) if its & large]
    nodes_left = min(PARTS_NODES, search.budget - search.nodes)
    # the large part with every tenant that may go there: no set adds more than this to its own count
    whole = _part_search(search, candidate, large, large_tenants, (), min(PART_NODES, nodes_left))
    nodes_left -= whole.nodes
    search.nodes += whole.nodes
    most_large = _most(whole)
    caps = dict((slot, search.caps[slot]) for slot in range(len(search.caps)) if small >> slot & 1)
    sets, _steps = small_part_sets(tenants, caps, search.classes, target + 1 - most_large, PARTS_STEPS)
    if sets is None:
        return None
    for chosen in sets:
        if len(chosen) + most_large <= target:
            break  # sorted largest first: no later set places more
        if nodes_left <= 0:
            return None
        taken = set(small_positions[number] for number, _slot in chosen)
        part = _part_search(search, candidate, large, large_tenants, taken, min(PART_NODES, nodes_left))
        nodes_left -= part.nodes
        search.nodes += part.nodes
        if len(chosen) + _most(part) <= target:
            continue
        if len(chosen) + part.best[0] <= target:
            return None  # this set may place more, and no plan of it was found
        # a plan placing more: the set on its slots and the large part's own plan
        positions = [number for number, _its in large_tenants if number not in taken]
        plan = [(small_positions[number], slot) for number, slot in chosen]
        slots = [slot for slot in range(len(search.caps)) if large >> slot & 1]
        plan += [(number, slots[slot]) for number, slot in zip(positions, part.best_assignment) if slot is not None]
        return None, plan
    return target, None


def _most(part):
    """The most tenants a search of one part places: its best when it finished, else its ceiling."""
    return part.ceiling[0] if part.exhausted else part.best[0]


def _part_search(search, candidate, large, large_tenants, taken, budget):
    """The search of the large part's nodes alone with its tenants not in ``taken`` (none of
    them asked to split again): its slot ``n`` is the ``n``-th slot of ``large``."""
    slots = [slot for slot in range(len(search.caps)) if large >> slot & 1]
    renumber = dict((slot, at) for at, slot in enumerate(slots))
    candidates = []
    for number, its in large_tenants:
        if number in taken:
            continue
        item = search.queue[number]
        options = [(renumber[slot], demand, rank, sticky) for slot, demand, rank, sticky in item.options
                   if its >> slot & 1]
        candidates.append(candidate(options, item.online, item.claims))
    part = type(search)([search.caps[slot] for slot in slots], [search.classes[slot] for slot in slots], candidates, budget)
    part.by_parts = False
    part.run()
    return part
