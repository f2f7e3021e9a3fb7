"""The referee's tests build structures of the candidate's objects and pass builtin types (issue 28).

Benchmarks' test code assigns attributes to the candidate's objects (MBPP/367 and /927 build trees of
its ``Node``) and passes types (MBPP/533: ``remove_datatype(t, int)``). Through the referee an
assignment is a channel operation that the host carries out on its own object, and the builtin types
of plain values cross by name. What must stay refused: the referee's own objects (functions, classes,
instances, modules), references that this candidate's process did not give, dunder and private
names, values nested too deep or too large; and nothing a hostile candidate does with an assignment
may turn a failing program into a passing one.
"""

from __future__ import annotations

import os

import pytest

from evalcore.jail import jailwire
from evalcore.jail.verdicts import run_tests

TREE = """
class Node:
    def __init__(self, data):
        self.data = data
        self.left = None
        self.right = None

def height(node):
    if node is None:
        return 0
    return max(height(node.left), height(node.right)) + 1

def in_order(node):
    return [] if node is None else in_order(node.left) + [node.data] + in_order(node.right)

def reverse(head):
    previous = None
    while head is not None:
        head.next, previous, head = previous, head, head.next
    return previous

def values(head):
    out = []
    while head is not None:
        out.append(head.data)
        head = head.next
    return out

def received(node, name):
    value = getattr(node, name)
    return type(value).__name__, type(value).__module__

def describe(node):
    return {name: repr(value) if isinstance(value, Node) else value for name, value in sorted(vars(node).items())}
"""

BUILD = """
import copy

root = Node(1)
root.left = Node(2)
root.right = Node(3)
root.left.left = Node(4)
root.left.right = Node(5)
root.left.left.left = Node(8)
assert height(root) == 4
assert in_order(root) == [8, 4, 2, 5, 1, 3]
assert root.left.left.data == 4 and root.right.left is None
assert root.left == root.left and root.left != root.right  # one stand-in per candidate object
root.right.data = [7, {"k": (1, 2)}]
assert in_order(root.right) == [[7, {"k": (1, 2)}]]
assert received(root.right, "data") == ("list", "builtins") and received(root, "left") == ("Node", "__main__")
root.left.left.left = None
assert height(root) == 3
del root.right.right
assert sorted(describe(root.right)) == ["data", "left"]
head = Node(1)
head.next = Node(2)
head.next.next = Node(3)
head.next.next.next = None
assert values(reverse(head)) == [3, 2, 1]
loop = Node(0)
loop.left = loop  # a cycle: the host holds the reference, nothing is copied
assert loop.left.left.left == loop and height(loop.right) == 0
assert copy.deepcopy(root) == root and copy.copy([root])[0] == root  # a copied reference is the reference
node = Node(9)
node._ref = "the candidate's"  # names the referee's stand-in might have used are the candidate's
node._label = 5
assert describe(node)["_ref"] == "the candidate's" and node._ref == "the candidate's" and node._label == 5
"""


def test_the_tests_build_a_tree_and_a_list_of_the_candidates_objects():
    verdict = run_tests(TREE, BUILD, timeout=10)
    assert verdict.passed and verdict.tampering == (), verdict


def test_a_wrong_solution_still_fails_on_the_tree():
    right = "return max(height(node.left), height(node.right))"
    wrong = TREE.replace(right, right.replace("max", "min"))
    verdict = run_tests(wrong, BUILD, timeout=10)
    assert verdict.result.startswith("failed") and verdict.tampering == (), verdict


TYPES = """
class Mine:
    pass

def keep(items, kind):
    return [item for item in items if isinstance(item, kind)]

def kind_of(value):
    return type(value)

def kinds():
    return int, float, complex, str, bytes, bytearray, bool, list, tuple, dict, set, frozenset, range, type(None)
"""

TYPE_TESTS = """
assert keep((4, 5, 7.7, "a", None, True), int) == [4, 5, True]
assert keep((4, 7.7, "a"), (int, float)) == [4, 7.7]
assert keep((1, None), type(None)) == [None]
assert kind_of(3) is int and kind_of("x") is str and kind_of({1}) is set and kind_of(None) is type(None)
assert kinds() == (int, float, complex, str, bytes, bytearray, bool, list, tuple, dict, set, frozenset, range,
                   type(None))
mine = kind_of(Mine())  # the candidate's own class: a reference, not a type here
assert not isinstance(mine, type) and mine == Mine and mine != int

class Local:
    pass

refused = []
for kind in (object, type, Exception, Local, type(keep)):
    try:
        keep([1], kind)
    except TypeError as error:
        refused.append(str(error).split(":")[0])
assert refused == ["cannot pass the type " + name + " to the candidate"
                   for name in ("object", "type", "Exception", "Local", "Remote")], refused
"""


def test_builtin_types_cross_by_name_and_no_other_type_does():
    verdict = run_tests(TYPES, TYPE_TESTS, timeout=10)
    assert verdict.passed and verdict.tampering == (), verdict
    refused = run_tests(TYPES, "class Local:\n    pass\nassert keep([1], Local) == []\n", timeout=10)
    assert refused.result.startswith("failed: cannot pass the type Local to the candidate"), refused
    assert refused.tampering == ()


REFUSALS = """
import math

class Local:
    pass

node = Node(1)

def refused(action, kind):
    try:
        action()
    except kind as error:
        return str(error)
    raise AssertionError(f"not refused: {action}")

# the referee's own objects that are not plain values
assert "cannot pass a Local" in refused(lambda: setattr(node, "left", Local()), TypeError)
assert "cannot pass a function" in refused(lambda: setattr(node, "left", refused), TypeError)
assert "cannot pass a module" in refused(lambda: setattr(node, "left", math), TypeError)
assert "cannot pass a function" in refused(lambda: setattr(node, "left", [1, {"k": refused}]), TypeError)
# references this candidate's process did not give: a stand-in made by hand, with a made-up id
Remote = type(node)
forged = Remote(node._Remote__peer, 12345)
assert "did not give" in refused(lambda: setattr(node, "left", forged), TypeError)
assert "did not give" in refused(lambda: setattr(forged, "data", 1), TypeError)
assert "did not give" in refused(lambda: height(forged), TypeError)
# names: dunder, private, not identifiers
for name in ("__class__", "__dict__", "__setattr__", "__secret", "not an identifier", "1st", ""):
    assert "only identifiers" in refused(lambda: setattr(node, name, 1), AttributeError)
    assert "only identifiers" in refused(lambda: delattr(node, name), AttributeError)
try:
    node.__class__ = Local
except AttributeError:
    pass
else:
    raise AssertionError("__class__ assigned")
# values too deep or too large for the channel
deep, deep_int = [], 1
for _ in range(150):
    deep = [deep]
for _ in range(101):  # the int itself is the value past the limit
    deep_int = [deep_int]
assert "nested more than 100 deep" in refused(lambda: setattr(node, "left", deep), TypeError)
assert "nested more than 100 deep" in refused(lambda: setattr(node, "left", deep_int), TypeError)
node.left = deep_int[0]  # 100 deep: crosses
assert received(node, "left") == ("list", "builtins")
node.left = None
assert "over the" in refused(lambda: setattr(node, "left", "x" * (65 << 20)), ValueError)
# and none of it reached the candidate's object; a large value that fits does
assert describe(node) == {"data": 1, "left": None, "right": None}
node.data = "y" * (20 << 20)
assert len(node.data) == 20 << 20 and node.data == "y" * (20 << 20)
"""


def test_what_cannot_be_assigned_is_refused_in_the_referee_and_reaches_nothing():
    verdict = run_tests(TREE, REFUSALS, timeout=30, memory_mb=2048)
    assert verdict.passed and verdict.tampering == (), verdict


@pytest.mark.parametrize(
    ("tests", "message"),
    [
        ("class Local:\n    pass\nNode(1).left = Local()\n", "failed: cannot pass a Local to the candidate"),
        ("Node(1).__class__ = int\n", "failed: cannot set or delete '__class__'"),
        ("Node(1).data = 'x' * (65 << 20)\n", "failed: message of"),
    ],
    ids=["referee-object", "dunder", "oversized"],
)
def test_a_refused_assignment_fails_the_tests_and_is_no_tampering(tests, message):
    verdict = run_tests(TREE, tests + "assert True\n", timeout=30, memory_mb=2048)
    assert verdict.result.startswith(message) and verdict.tampering == (), verdict


HOSTILE = {
    # assignments of nodes that do nothing, so that a tree never grows: the tests' heights fail
    "ignores": "def __setattr__(self, name, value):\n        if not isinstance(value, Node):\n"
               "            object.__setattr__(self, name, value)\n",
    # the host's process ends, or raises SystemExit(0), in the middle of an assignment
    "exits": "def __setattr__(self, name, value):\n        __import__('os')._exit(0)\n",
    "system-exit": "def __setattr__(self, name, value):\n        raise SystemExit(0)\n",
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_candidate_cannot_pass_a_wrong_tree_through_its_assignments(name):
    candidate = TREE.replace("class Node:\n", "class Node:\n    " + HOSTILE[name])
    verdict = run_tests(candidate, BUILD, timeout=10)
    assert verdict.result.startswith("failed"), (name, verdict)
    if name == "ignores":
        # root.left stayed None, so root.left.left = Node(4) fails in the tests
        assert verdict.result == "failed: 'NoneType' object has no attribute 'left'", verdict


def test_a_reference_crosses_back_only_to_the_peer_that_made_it():
    first_read, first_write = os.pipe()
    second_read, second_write = os.pipe()
    try:
        os.set_blocking(first_read, False)
        os.set_blocking(second_read, False)
        first, second = jailwire.Peer(first_write, -1), jailwire.Peer(second_write, -1)
        ours, theirs = first.resolve(0), second.resolve(0)
        assert first.resolve(0) is ours and ours != theirs and ours == ours
        assert first.refer(ours) == {"r": 0}
        for action in (
            lambda: setattr(ours, "left", theirs),  # a reference of another host
            lambda: setattr(theirs, "left", ours),
            lambda: ours(theirs),
            lambda: setattr(ours, "left", jailwire.Remote(first, 0)),  # a stand-in made by hand
            lambda: jailwire.Remote(first, 7).data,
        ):
            with pytest.raises(TypeError, match="did not give"):
                action()
        for name in ("__class__", "__dict__", "__private", "a b"):
            with pytest.raises(AttributeError, match="only identifiers"):
                setattr(ours, name, 1)
        for read in (first_read, second_read):  # refused before a byte was written
            with pytest.raises(BlockingIOError):
                os.read(read, 1)
    finally:
        for fd in (first_read, first_write, second_read, second_write):
            os.close(fd)


def test_types_cross_by_name_only():
    refuse = pytest.fail
    for kind in jailwire.TYPES.values():
        assert jailwire.decode(jailwire.encode(kind, refuse), refuse) is kind
    encoded = jailwire.encode([int, (str, type(None))], refuse)
    assert encoded == {"l": [{"ty": "int"}, {"t": [{"ty": "str"}, {"ty": "NoneType"}]}]}
    assert jailwire.encode(bool, refuse) == {"ty": "bool"} and jailwire.encode(True, refuse) is True

    class Mine(int):
        pass

    refs: list = []
    for kind in (object, type, Mine, Exception):
        assert jailwire.encode(kind, lambda v: refs.append(v) or {"r": len(refs) - 1}) == {"r": len(refs) - 1}
    for message in ({"ty": "object"}, {"ty": "type"}, {"ty": "Mine"}, {"ty": ["int"]}, {"ty": "__import__"}):
        with pytest.raises(jailwire.ProtocolError, match="not a type that crosses"):
            jailwire.decode(message, refuse)
