"""The one registry type: name -> item, "did you mean" on a miss, items by reference
imported on first use, a fallback registry for names it does not hold."""

from __future__ import annotations

import sys

import pytest

from tracerl.config.registry import Ref, Registry, UnknownName, did_you_mean


def test_a_miss_names_the_closest_and_every_name():
    colours = Registry("colour", {"red": 1, "green": 2})
    assert colours.get("red") == 1 and colours["green"] == 2
    with pytest.raises(UnknownName) as caught:
        colours.get("gren")
    assert str(caught.value) == "unknown colour 'gren' (did you mean 'green'?); colours: green, red"
    # Callers that caught KeyError (a mapping) or ValueError (a bad argument) still do.
    assert isinstance(caught.value, KeyError) and isinstance(caught.value, ValueError)
    assert "blue" not in colours and "red" in colours and list(colours) == ["red", "green"]
    assert did_you_mean("zzz", ["red"]) == ""


def test_items_by_reference_are_imported_on_first_use_and_built():
    name = "json.decoder"
    sys.modules.pop("json.tool", None)
    lazy = Registry("thing", {"tool": Ref("json.tool:main"), "decoder": Ref(f"{name}:JSONDecoder")},
                    build=lambda cls: ("built", cls))
    assert "json.tool" not in sys.modules  # declaring it imports nothing
    assert lazy.get("tool")[0] == "built" and "json.tool" in sys.modules
    assert lazy.get("tool") is lazy.get("tool")  # built once
    assert [r.module for r in lazy.refs()] == ["json.tool", name]
    with pytest.raises(ValueError, match="'module:attribute'"):
        Ref("json.tool")


def test_a_fallback_holds_the_names_a_registry_does_not():
    mine = Registry("shape", {"toy_cube": 3})
    shapes = Registry("shape", {"circle": 0},
                      fallback=lambda n: mine if n.startswith("toy_") else None,
                      fallback_names=mine.own_names)
    assert shapes.get("toy_cube") == 3 and "toy_cube" in shapes and "cube" not in shapes
    assert shapes.names() == ["circle", "toy_cube"]
    with pytest.raises(UnknownName, match="did you mean 'toy_cube'"):
        shapes.get("toy_cub")


def test_items_added_at_run_time_keep_their_names():
    reg = Registry("verifier", {"a@1": "A"})
    with pytest.raises(ValueError, match="verifier 'a@1' is already registered"):
        reg.add("a@1", "other")
    reg.add("a@1", "other", replace=True)
    reg.add("b@1", "B")
    assert reg.get("a@1") == "other" and reg.get("b@1") == "B"
    reg.remove("b@1")
    assert "b@1" not in reg
