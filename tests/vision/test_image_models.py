"""Image models over pixel vectors: ViT patches, 2-D positions, the cnn2d baseline."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from selfattn.datatypes import Batch
from selfattn.models.architectures.cnn2d import CNN2DEncoder
from selfattn.models.composed import TaskModel
from selfattn.models.heads import SequenceClassifier
from selfattn.models.option_groups import ModelOptions
from selfattn.models.registry import model_options
from selfattn.models.spec import TaskSpec
from selfattn.models.task_model import build_model_from_spec
from selfattn.models.vision import ImageEmbedding
from selfattn.positional import GRID_POSITIONAL
from selfattn.vision import image_to_vectors

from ..helpers_models import build

SHAPE = (8, 8, 1)
VIT = model_options(
    embed_dim=16,
    num_heads=2,
    num_layers=1,
    ffn_dim=32,
    dropout=0.0,
    positional=None,
    grid_positional="sinusoidal2d",
    patch_size=2,
)
CNN = model_options(
    architecture="cnn2d", embed_dim=8, num_layers=2, ffn_dim=16, window_k=1, dropout=0.0
)


pytestmark = pytest.mark.usefixtures("one_thread")


def _batch(size: int = 4, shape: tuple[int, int, int] = SHAPE) -> Batch:
    height, width, channels = shape
    features = torch.rand(size, height * width, channels)
    mask = torch.zeros(size, height * width, dtype=torch.bool)
    return Batch(None, None, features, mask, torch.randint(3, (size,)))


def _model(config: ModelOptions, shape: tuple[int, int, int] | None = SHAPE) -> TaskModel:
    model: TaskModel = build(
        config, "sequence", num_labels=3, feature_dim=SHAPE[2], max_len=64, image_shape=shape
    )
    return model


@pytest.mark.parametrize(("patch_size", "vectors"), [(None, 64), (1, 64), (2, 16), (4, 4), (8, 1)])
def test_pixels_or_patches_become_vectors(patch_size: int | None, vectors: int) -> None:
    embedding = ImageEmbedding(SHAPE, 16, patch_size=patch_size, grid_positional="learned2d")
    batch = _batch()
    assert embedding(batch).shape == (4, vectors, 16)
    assert embedding.num_vectors == vectors
    assert embedding.padding_mask(batch).shape == (4, vectors)
    assert not embedding.padding_mask(batch).any()


def test_pixel_vectors_fold_back_into_the_image_row_major() -> None:
    image = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).view(2, 3, 4, 5)  # (B, C, H, W)
    batch = Batch(
        None,
        None,
        image_to_vectors(image),
        torch.zeros(2, 20, dtype=torch.bool),
        (torch.zeros(2, dtype=torch.long)),
    )
    torch.testing.assert_close(ImageEmbedding((4, 5, 3), 8).image(batch), image)


@pytest.mark.parametrize("name", sorted(GRID_POSITIONAL))
def test_grid_positional_adds_each_patch_its_row_and_column(name: str) -> None:
    plain = ImageEmbedding(SHAPE, 16, patch_size=2)
    with_positions = ImageEmbedding(SHAPE, 16, patch_size=2, grid_positional=name)
    with_positions.cut.load_state_dict(plain.cut.state_dict())
    batch = _batch()
    assert with_positions.positional is not None
    added = with_positions(batch) - plain(batch)  # (B, 16, E)
    encoding = with_positions.positional.encoding(4, 4)  # (16, E), 4 × 4 patches
    torch.testing.assert_close(added, encoding.expand_as(added))


def test_cnn2d_keeps_one_vector_per_pixel_and_mean_is_global_average_pooling() -> None:
    encoder = CNN2DEncoder(3, 5, num_layers=2, grid=(8, 4))  # 8×4 → 4×2 → 2×1
    x = torch.randn(2, 32, 3)
    out = encoder(x, torch.zeros(2, 32, dtype=torch.bool))
    assert out.shape == (2, 32, 5)
    pooled = encoder.net(x.transpose(1, 2).unflatten(2, (8, 4)))  # (B, 5, 2, 1)
    torch.testing.assert_close(out.mean(dim=1), pooled.mean(dim=(2, 3)))
    assert encoder.scale == (4, 4)


def test_cnn2d_stops_pooling_at_odd_sides() -> None:
    encoder = CNN2DEncoder(1, 4, num_layers=3, grid=(28, 28))  # 28 → 14 → 7 → 7
    assert encoder.scale == (4, 4)
    assert encoder(torch.randn(1, 784, 1), torch.zeros(1, 784, dtype=torch.bool)).shape == (
        1,
        784,
        4,
    )


@pytest.mark.parametrize(
    "config",
    [VIT, replace(VIT, patch_size=None), replace(VIT, grid_positional="learned2d"), CNN],
    ids=["vit", "pixels", "vit-learned2d", "cnn2d"],
)
def test_image_models_fit_a_tiny_batch(config: ModelOptions) -> None:
    model = _model(config)
    batch = _batch(6)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(100):
        logits = model(batch)
        if bool((logits.argmax(-1) == batch.labels).all()):
            break
        optimizer.zero_grad()
        F.cross_entropy(logits, batch.labels).backward()
        optimizer.step()
    assert bool((model(batch).argmax(-1) == batch.labels).all())


def test_vit_attention_maps_cover_the_patches() -> None:
    maps = _model(VIT).attention_maps(_batch(2))
    assert [tuple(m.shape) for m in maps] == [(2, 2, 16, 16)]


def test_vit_attention_labels_name_each_patch_by_its_place() -> None:
    """Rows and columns of a ViT's maps are patches (row-major), not the input's pixels."""
    pixels = [str(i) for i in range(SHAPE[0] * SHAPE[1])]
    labels = _model(VIT).attention_labels(pixels)
    assert len(labels) == 16 and labels[:5] == ["r0c0", "r0c1", "r0c2", "r0c3", "r1c0"]
    with_cls = _model(replace(VIT, pooling="cls")).attention_labels(pixels)
    assert with_cls[0] == "[CLS]" and with_cls[1:] == labels
    # One vector per pixel: the pixels keep their own names.
    assert _model(replace(VIT, patch_size=None)).attention_labels(pixels) == pixels


def test_vit_with_a_class_token_reads_its_output() -> None:
    """ViT's own pooling: a learned [CLS] vector before the patches, the head reads it."""
    model = _model(replace(VIT, pooling="cls")).eval()
    batch = _batch(2)
    maps = model.attention_maps(batch)
    assert [tuple(m.shape) for m in maps] == [(2, 2, 17, 17)]  # [CLS] + 16 patches
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(2, 2, 17))
    x, mask = model.encoder_inputs(batch)
    head = model.head
    assert isinstance(head, SequenceClassifier)
    torch.testing.assert_close(model(batch), head.proj(model.encoder(x, mask)[:, 0]))


def test_task_spec_round_trip_with_image_shape() -> None:
    spec = _model(VIT).spec
    assert spec is not None and spec.image_shape == SHAPE
    stored = json.loads(json.dumps(spec.to_dict()))
    assert TaskSpec.from_dict(stored) == spec
    rebuilt = build_model_from_spec(VIT, TaskSpec.from_dict(stored))
    assert isinstance(rebuilt.embedding, ImageEmbedding)
    old = {key: value for key, value in stored.items() if key != "image_shape"}
    assert TaskSpec.from_dict(old).image_shape is None  # checkpoints from before images


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"patch_size": 3}, "do not tile a 8 × 8 image"),
        ({"patch_size": 0}, "patch_size must be >= 1"),
        ({"grid_positional": "nope"}, "unknown encoding 'nope'"),
        ({"positional": "sinusoidal"}, 'set model.positional = "none"'),
    ],
)
def test_config_errors_are_one_line(change: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        _model(replace(VIT, **change))  # type: ignore[arg-type]
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("config", [VIT, replace(VIT, grid_positional=None), CNN])
def test_image_options_need_image_data(config: ModelOptions) -> None:
    with pytest.raises(ValueError, match="need image data"):
        _model(config, shape=None)


def test_image_models_refuse_token_tasks_and_wrong_images() -> None:
    with pytest.raises(ValueError, match="whole images"):
        build(VIT, "token", num_labels=3, feature_dim=1, image_shape=SHAPE)
    with pytest.raises(ValueError, match=r"8×8 images of 1 channel"):
        _model(VIT)(_batch(2, (4, 4, 1)))
    with pytest.raises(ValueError, match="needs the image grid"):
        CNN2DEncoder.from_config(CNN)


def test_plain_encoders_still_read_image_pixels_as_a_vector_set() -> None:
    config = model_options(embed_dim=16, num_heads=2, num_layers=1, ffn_dim=32)
    model = _model(config)
    assert not isinstance(model.embedding, ImageEmbedding)
    assert model(_batch(3)).shape == (3, 3)
