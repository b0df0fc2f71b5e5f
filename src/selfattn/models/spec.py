"""What a model's input and output look like (:class:`TaskSpec`): what a checkpoint stores
beside the configuration to rebuild its model. The training loop, checkpoints and run
folders read it; it holds no model, so they need none of the models' concrete types."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from selfattn.datatypes import TaskType


@dataclass(frozen=True)
class TaskSpec:
    """What a model's input and output look like: everything besides its ``[model]`` options
    needed to rebuild it (it is stored in checkpoints).

    Attributes:
        task: the label layout, what the labels (and the model's head) look like:
            ``"token"`` (a label per vector), ``"sequence"`` (a label per set),
            ``"multilabel"`` (a set of labels per set), ``"regression"`` (a number per
            set), ``"seq2seq"`` (an output sequence) or ``"bits"`` (bit vectors per step).
        num_labels: number of classes (1 for regression).
        vocab_size: word ids (text input), else ``None``.
        char_vocab_size: character ids (text input with character features), else ``None``.
        feature_dim: size of each input vector (vector input), else ``None``.
        max_len: the longest sequence the positional encoding must cover.
        edge_dim: features per graph edge (graph input with edge features), else ``None``.
        image_shape: ``(H, W, C)`` of every image (image recipes, whose vectors are the
            pixels), else ``None``.
        target_mean: regression: the training targets' mean (0 otherwise).
        target_std: regression: their standard deviation (1 otherwise).
        pretrained: the config of the BERT checkpoint the model was fine-tuned from
            (:class:`~selfattn.models.bert.BertConfig`'s fields), else ``None``.
        task_type: the registered task type that trained the model and reads it back
            (:data:`selfattn.tasks.TASKS`; a new one may share a built-in's layout).
            Left out (as in runs saved before it was stored): the built-in task type of
            the layout, which bears its name. Specs that differ only in it are equal: the
            model is the same (a run of one task type may start another's).
    """

    task: TaskType
    num_labels: int
    vocab_size: int | None = None
    char_vocab_size: int | None = None
    feature_dim: int | None = None
    max_len: int = 512
    edge_dim: int | None = None
    image_shape: tuple[int, int, int] | None = None
    target_mean: float = 0.0
    target_std: float = 1.0
    pretrained: dict[str, Any] | None = None
    task_type: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.task_type:
            object.__setattr__(self, "task_type", self.task)

    def model_fields(self) -> dict[str, Any]:
        """What a model is built from: every field but ``task_type`` (a model depends on
        the label layout, never on which task type trains it)."""
        fields = self.to_dict()
        del fields["task_type"]
        return fields

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TaskSpec:
        """The inverse of :meth:`to_dict`."""
        if values.get("image_shape") is not None:  # JSON stores the tuple as a list
            values = {**values, "image_shape": tuple(values["image_shape"])}
        return cls(**values)
