"""A user's molecule or graph read as the graph recipes' training examples were.

* molecules (``solubility``, ``solubility-logs``): a ``.mol`` or ``.sdf`` file, read by the
  recipes' own V2000 reader (:func:`~selfattn.data.recipes.graphs.read_sdf`), or graph
  JSON of atoms ``{"nodes": ["C", "N+", "O-"], "edges": [[i, j, bond order], ...]}``;
  either way atoms one-hot as the recipes make them
  (:func:`~selfattn.data.recipes.graphs.molecule_example`);
* graphs of node vectors (``karate``, a user's graphs): graph JSON
  ``{"nodes": [[features], ...], "edges": [[i, j], ...]}`` with ``edge_features`` where
  the model has them.

Graph JSON comes in a ``.json`` file or as the argument itself. SMILES is not read: it
needs aromaticity and kekulisation (RDKit, a ~30 MB wheel), and the recipes themselves
read molfiles without RDKit.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from selfattn.data.readers.user_description import InputDescription, check_width
from selfattn.data.recipes.graphs import (
    BOND_ORDERS,
    ELEMENTS,
    Molecule,
    atom_features,
    molecule_example,
    read_sdf,
)
from selfattn.datatypes import DataError, Example
from selfattn.specials import NO_LABEL

_ATOM = re.compile(r"([A-Z][a-z]?)(?:([+-])(\d*))?")

#: Every element symbol, so that a typo ("Cx") is an error rather than the featurisation's
#: "other element" column, which the recipes keep for real but rare atoms (tin).
_SYMBOLS = """H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge
    As Se Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm
    Eu Gd Tb Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U
    Np Pu Am Cm Bk Cf Es Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og"""
PERIODIC_TABLE = frozenset(_SYMBOLS.split())

#: The most nodes and edges a user's graph may have. Every graph of the recipes has under
#: 100 nodes; the bounds are far above any model's max_len, and they cap the reader's work
#: (an input past max_len is the predictor's to refuse or cut, after it is read).
MAX_NODES = 10_000
MAX_EDGES = 100_000
#: The largest graph JSON file read (bytes): far above what MAX_NODES nodes take.
MAX_JSON_BYTES = 64 * 2**20


def molecule_settings() -> dict[str, Any]:
    """The atom featurisation's settings as a checkpoint stores them (and compares them)."""
    return {"elements": list(ELEMENTS), "bond_orders": list(BOND_ORDERS)}


def atom_width() -> int:
    """F of the atom vectors the featurisation makes."""
    return int(atom_features(Molecule("", ("C",), (0,), ())).shape[1])


def parse_json(text: str, where: object) -> Any:
    """``text`` parsed; invalid JSON is a one-line :class:`DataError` naming ``where``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{where}: not valid JSON ({err.msg}, line {err.lineno})") from None
    except RecursionError:  # the parser recurses once per nested list or object
        raise DataError(f"{where}: JSON nested too deeply to be a graph") from None


def read_json(path: Path) -> Any:
    """A UTF-8 JSON file parsed; anything else is a one-line :class:`DataError`."""
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise DataError(
                f"{path}: {size:,} bytes; graph JSON is read up to {MAX_JSON_BYTES:,} bytes"
            )
        return parse_json(path.read_text(encoding="utf-8"), path)
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot read as UTF-8 text ({err})") from None


def graph_example(data: Any, description: InputDescription, source: str, where: object) -> Example:
    """Graph JSON: atoms and bonds of a molecule model, else node vectors and edges.

    Returns:
        An unlabelled example: ``features`` ``(L, F)``, ``edges`` ``(E, 2)`` and, where the
        model has them, ``edge_features`` ``(E, D_e)``; for a symmetric model each edge
        also reversed, after the given ones.

    Raises:
        DataError: one line naming ``where`` and what in the JSON is malformed.
    """
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or not data["nodes"]:
        raise DataError(f'{where}: expected {{"nodes": [at least one], "edges": [[i, j], ...]}}')
    nodes, edges = data["nodes"], data.get("edges", [])
    check_size(len(nodes), len(edges) if isinstance(edges, list) else 0, where)
    bonds = description.kind == "molecule" and all(isinstance(n, str) for n in nodes)
    for k, edge in enumerate(edges if isinstance(edges, list) else [None]):
        ok = isinstance(edge, list) and len(edge) in ((2, 3) if bonds else (2,))
        if not ok or not all(type(n) is int for n in edge):
            raise DataError(f"{where}: edge {k} is not [i, j] of integers: {edge!r}")
        if not all(0 <= n < len(nodes) for n in edge[:2]):
            raise DataError(f"{where}: edge {k} {edge} names a node outside 0-{len(nodes) - 1}")
    if bonds:
        return _molecule_json(nodes, edges, source, where)
    try:
        features = np.asarray(nodes, dtype=np.float32).reshape(len(nodes), -1)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past float64
        raise DataError(f"{where}: nodes must be lists of numbers, all of one length") from None
    if features.shape[1] == 0 or not np.isfinite(features).all():
        raise DataError(f"{where}: node features must be finite numbers, at least one each")
    check_width(where, features, description)
    rows = data.get("edge_features")
    if (rows is None) != (description.edge_dim is None):
        need = "needs" if description.edge_dim is not None else "reads no"
        raise DataError(f"{where}: this model {need} edge_features (one row per edge)")
    first: dict[tuple[int, int], int] = {}  # each edge once, with the row it was given in
    for row, (a, b) in enumerate(edges):
        first.setdefault((a, b), row)
    if description.symmetric:  # training lists the edges, then their reverses
        for a, b in list(first):
            first.setdefault((b, a), first[a, b])
    edge_features = None
    if rows is not None:
        table = np.asarray(rows, dtype=np.float32)
        if table.shape != (len(edges), description.edge_dim):
            raise DataError(f"{where}: edge_features must be {len(edges)} × {description.edge_dim}")
        edge_features = table[list(first.values())]
    pairs = np.array(list(first), dtype=np.int64).reshape(-1, 2)
    return Example(None, features, NO_LABEL, source, pairs, edge_features)


def check_size(nodes: int, edges: int, where: object) -> None:
    """Refuse a graph of more than :data:`MAX_NODES` nodes or :data:`MAX_EDGES` edges.

    Raises:
        DataError: ``where: 100000 nodes and 99999 edges; a graph is read up to …``.
    """
    if nodes > MAX_NODES or edges > MAX_EDGES:
        raise DataError(
            f"{where}: {nodes} nodes and {edges} edges; a graph is read up to {MAX_NODES} "
            f"nodes and {MAX_EDGES} edges (selfattn.data.readers.user_graphs.MAX_NODES, "
            "MAX_EDGES)"
        )


def _molecule_json(nodes: list[str], edges: list[list[int]], source: str, where: object) -> Example:
    """Atoms ``"C"``, ``"N+"``, ``"O-2"`` and bonds ``[i, j, order]`` (order 1 unless
    given) → the solubility recipes' :func:`~selfattn.data.recipes.graphs.molecule_example`."""
    elements, charges = [], []
    for k, node in enumerate(nodes):
        match = _ATOM.fullmatch(node)
        if match is None:
            raise DataError(f"{where}: node {k} is not an atom such as C, N+ or O-: {node!r}")
        element, sign, count = match.groups()
        if element not in PERIODIC_TABLE:
            raise DataError(f"{where}: node {k}: {element!r} is not an element symbol")
        elements.append(element)
        charges.append(0 if sign is None else int(f"{sign}{count or 1}"))
    bonds: list[tuple[int, int, int]] = []
    joined: set[tuple[int, int]] = set()  # each bond's atoms, the smaller first
    for a, b, *order in edges:
        bond = (a, b, order[0] if order else 1)
        pair = (min(a, b), max(a, b))
        if a == b or pair in joined or bond[2] not in BOND_ORDERS:
            raise DataError(
                f"{where}: bond {a}-{b} of order {bond[2]}: list each bond once, between two "
                f"atoms, with an order in {list(BOND_ORDERS)}"
            )
        joined.add(pair)
        bonds.append(bond)
    molecule = Molecule("", tuple(elements), tuple(charges), tuple(bonds))
    return replace(molecule_example(molecule, NO_LABEL), source=source)


def read_molecule(path: Path, source: str) -> Example:
    """The one molecule of a ``.mol`` or ``.sdf`` file, read by the recipes' own V2000
    reader.

    Raises:
        DataError: not UTF-8 text, not a V2000 molfile, or not exactly one molecule.
    """
    try:
        molecules = read_sdf(path)
    except (OSError, UnicodeDecodeError) as err:  # before ValueError, which it is
        raise DataError(f"{path}: cannot read as UTF-8 text ({err})") from None
    except (DataError, IndexError, ValueError) as err:  # a damaged M  CHG or data line
        problem = str(err)
        raise DataError(
            problem if problem.startswith(str(path)) else f"{path}: not a molfile ({problem})"
        ) from None
    if len(molecules) != 1:
        raise DataError(f"{path}: holds {len(molecules)} molecules; give one")
    return replace(molecule_example(molecules[0], NO_LABEL), source=source)
