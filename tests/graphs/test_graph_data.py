"""Graph data: the SDF reader, the solubility and karate recipes, edges in batches."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from selfattn.data import RECIPES, Collator, DataError, Example, LabelVocabulary, load_dataset
from selfattn.data.recipes.graphs import (
    ELEMENTS,
    KARATE_SPLIT,
    atom_features,
    karate_splits,
    molecule_example,
    read_sdf,
)
from selfattn.specials import NO_LABEL

# Ethanoate (acetate) anion and a lone ammonium: C-C(=O)-O(-); N(+).
MOLFILE = """acetate
     RDKit          2D

  4  3  0  0  0  0  0  0  0  0999 V2000
    0.0000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0
    1.2990    0.7500    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0
    1.2990    2.2500    0.0000 O   0  0  0  0  0  0  0  0  0  0  0  0
    2.5981   -0.0000    0.0000 O   0  0  0  0  0  0  0  0  0  0  0  0
  1  2  1  0
  2  3  2  0
  2  4  1  0
M  CHG  1   4  -1
M  END
>  <SOL>  (1)
-1.5

>  <SOL_classification>  (1)
(C) high

$$$$
ammonium
     RDKit          2D

  1  0  0  0  0  0  0  0  0  0999 V2000
    0.0000    0.0000    0.0000 N   0  0  0  0  0  0  0  0  0  0  0  0
M  CHG  1   1   1
M  END
$$$$
"""


def test_read_sdf_atoms_bonds_charges_and_items(tmp_path: Path) -> None:
    path = tmp_path / "two.sdf"
    path.write_text(MOLFILE, encoding="utf-8")
    acetate, ammonium = read_sdf(path)
    assert acetate.name == "acetate" and acetate.elements == ("C", "C", "O", "O")
    assert acetate.bonds == ((0, 1, 1), (1, 2, 2), (1, 3, 1))
    assert acetate.charges == (0, 0, 0, -1)
    assert acetate.properties == {"SOL": "-1.5", "SOL_classification": "(C) high"}
    assert acetate.source == f"{path}:1" and ammonium.source == f"{path}:21"
    assert ammonium.bonds == () and ammonium.charges == (1,)

    features = atom_features(acetate)
    element, degree, hydrogens, charge = np.split(features, np.cumsum([len(ELEMENTS) + 1, 5, 4]), 1)
    assert element.argmax(1).tolist() == [0, 0, 2, 2]  # C C O O
    assert degree.argmax(1).tolist() == [1, 3, 1, 1]
    assert hydrogens.argmax(1).tolist() == [3, 0, 0, 0]  # CH3; the O− has no H
    assert charge.argmax(1).tolist() == [1, 1, 1, 0]
    assert atom_features(ammonium)[0, len(ELEMENTS) + 1 + 5 + 3] == 1  # NH4+: 4 → capped at 3


def test_molecule_example_has_both_directions_of_every_bond(tmp_path: Path) -> None:
    path = tmp_path / "one.sdf"
    path.write_text(MOLFILE, encoding="utf-8")
    example = molecule_example(read_sdf(path)[0], "high")
    assert example.edges is not None and example.edge_features is not None
    assert sorted(map(tuple, example.edges.tolist())) == [
        (0, 1), (1, 0), (1, 2), (1, 3), (2, 1), (3, 1)
    ]  # fmt: skip
    double = [i for i, (a, b) in enumerate(example.edges.tolist()) if {a, b} == {1, 2}]
    assert example.edge_features[double].argmax(1).tolist() == [1, 1]


def test_read_sdf_reads_a_molfile_without_the_final_dollars(tmp_path: Path) -> None:
    """A .mol file is one block that stops at ``M  END``: no data items, no ``$$$$``."""
    block = MOLFILE.split("M  END\n", 1)[0] + "M  END\n"
    path = tmp_path / "acetate.mol"
    for text in (block, block + "\n\n", block.rstrip("\n")):
        path.write_text(text, encoding="utf-8")
        (acetate,) = read_sdf(path)
        assert acetate.elements == ("C", "C", "O", "O") and acetate.charges == (0, 0, 0, -1)
        assert acetate.bonds == ((0, 1, 1), (1, 2, 2), (1, 3, 1)) and acetate.properties == {}
    path.write_text(MOLFILE.rsplit("$$$$", 1)[0], encoding="utf-8")  # an SDF's last one too
    assert [m.name for m in read_sdf(path)] == ["acetate", "ammonium"]


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        ("  2 xx  2  0", "expected a bond line"),
        ("  2  9  2  0", "bond 2-9 of order 2 does not fit 4 atoms"),
        ("  2  3  7  0", "bond 2-3 of order 7"),
    ],
)
def test_read_sdf_names_file_and_line_of_a_malformed_bond(
    tmp_path: Path, broken: str, message: str
) -> None:
    lines = MOLFILE.splitlines()
    assert lines[9] == "  2  3  2  0"
    lines[9] = broken
    path = tmp_path / "bad.sdf"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(DataError, match=rf"bad.sdf:10: {message}"):
        read_sdf(path)


def test_read_sdf_refuses_v3000_and_truncated_files(tmp_path: Path) -> None:
    path = tmp_path / "v3.sdf"
    path.write_text(MOLFILE.replace("V2000", "V3000", 1), encoding="utf-8")
    with pytest.raises(DataError, match=r"v3.sdf:4: expected a V2000 counts line"):
        read_sdf(path)
    path.write_text("\n".join(MOLFILE.splitlines()[:12]), encoding="utf-8")
    with pytest.raises(DataError, match="ends inside a molecule"):
        read_sdf(path)


def test_solubility_recipe_on_the_real_files() -> None:
    recipe = RECIPES["solubility"]
    try:
        recipe.fetch()
    except DataError as err:
        pytest.skip(f"solubility: its data cannot be fetched here ({err})")
    splits = load_dataset("solubility")
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (922, 103, 257)
    assert Counter(e.label for e in splits.test) == {"low": 102, "medium": 115, "high": 40}
    for example in splits.train + splits.dev + splits.test:
        assert example.features is not None and example.edges is not None
        assert example.edge_features is not None
        assert example.edges.max() < len(example)
        assert example.edge_features.shape == (len(example.edges), 4)
    assert max(len(e) for e in splits.train) == 47


def test_karate_splits_label_disjoint_node_sets() -> None:
    train, dev, test = (part[0] for part in karate_splits())
    labelled = [
        {i for i, label in enumerate(e.label) if label != NO_LABEL} for e in (train, dev, test)
    ]
    assert [len(s) for s in labelled] == [2 * n for n in KARATE_SPLIT]
    assert not (labelled[0] & labelled[1] or labelled[0] & labelled[2] or labelled[1] & labelled[2])
    assert train.edges is not None and train.edges.shape == (156, 2)
    assert train.features is not None and train.features.shape == (34, 34)
    assert load_dataset("karate").task == "token"


def test_unlabelled_nodes_are_no_class_and_ignored_by_the_loss() -> None:
    splits = load_dataset("karate")
    labels = LabelVocabulary.for_splits(splits)
    assert labels.labels == ["Mr. Hi", "Officer"]
    batch = Collator(None, None, labels, "token")(splits.train)
    train = splits.train[0]
    scored = [i for i, label in enumerate(train.label) if label != NO_LABEL]
    assert (batch.labels[0] != -100).nonzero().squeeze(1).tolist() == scored


def test_collator_offsets_edges_by_each_graph_position() -> None:
    labels = LabelVocabulary(["a"])
    first = Example(None, np.zeros((3, 2), np.float32), "a", "g1", edges=np.array([[0, 2]]))
    second = Example(
        None,
        np.zeros((2, 2), np.float32),
        "a",
        "g2",
        edges=np.array([[1, 0], [0, 1]]),
    )
    batch = Collator(None, None, labels, "sequence")([first, second])
    assert batch.edge_index is not None and batch.edge_attr is None
    assert batch.edge_index.tolist() == [[0, 4, 3], [2, 3, 4]]  # L = 3: graph 2 starts at 3
    moved = batch.to("cpu")
    assert moved.edge_index is not None and torch.equal(moved.edge_index, batch.edge_index)


@pytest.mark.parametrize(
    ("edges", "edge_features", "message"),
    [
        (np.array([[0, 3]]), None, "g: an edge refers to a node outside 0..2"),
        (np.array([[0, 1]]), np.zeros((2, 4), np.float32), "g: 2 edge feature rows for 1 edges"),
    ],
)
def test_collator_edge_errors_name_the_example(
    edges: np.ndarray, edge_features: np.ndarray | None, message: str
) -> None:
    example = Example(
        None, np.zeros((3, 2), np.float32), "a", "g", edges=edges, edge_features=edge_features
    )
    with pytest.raises(DataError, match=message):
        Collator(None, None, LabelVocabulary(["a"]), "sequence")([example])
