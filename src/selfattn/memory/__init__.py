"""Attention over an external memory (lecture 003): the end-to-end memory network, which
reads a memory of sentences with several hops of attention, and the neural Turing
machine's attention-based reading and writing."""

from selfattn.memory.memn2n import MemN2N, MemoryOutput, add_empty_memories, position_encoding

__all__ = ["MemN2N", "MemoryOutput", "add_empty_memories", "position_encoding"]
