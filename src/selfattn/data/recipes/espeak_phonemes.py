"""espeak-ng's own phoneme timing: the C library's synthesis callback, through ctypes.

The ``espeak-ng`` program writes audio but no timing (``--pho`` needs an mbrola voice,
``-X`` traces the rules, not the time). Its library, ``libespeak-ng.so.1`` (Debian's
``libespeak-ng1`` 1.51, fetched into the cache with the program), does: initialised with
``espeakINITIALIZE_PHONEME_EVENTS``, every callback of a synthesis
(``AUDIO_OUTPUT_SYNCHRONOUS``) carries the next chunk of 16-bit samples and a list of
``espeak_EVENT`` records, one ``espeakEVENT_PHONEME`` per phoneme, whose ``sample`` field
is the sample at which the synthesiser started that phoneme (``audio_position`` is the
same in ms) and whose ``id.string`` is its mnemonic (``p``, ``I2``, ``e@``, ``_:``).
Audio and timing come from the same run, so they cannot disagree.

The cached libraries are loaded by absolute path with ``RTLD_GLOBAL``, dependencies
first, so the dynamic linker finds libespeak-ng's ``DT_NEEDED`` libraries already
loaded: nothing is installed and ``LD_LIBRARY_PATH`` need not be set before Python
starts. The library keeps global state (one voice at a time), so one process holds one
:class:`EspeakPhonemes`, and a lock serialises its syntheses.

    >>> speaker = EspeakPhonemes.load(ESPEAK_SOURCE.fetch())
    >>> samples, rate, phonemes = speaker.synthesize("the board", "en-us+f2")
    >>> phonemes[:2]  # (first sample, mnemonic), rate 22050
    [(859, 'D'), (1579, '@2')]
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from selfattn.datatypes import DataError

# speak_lib.h of espeak-ng 1.51.
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_PHONEME_EVENTS = 0x0001
_INITIALIZE_DONT_EXIT = 0x8000  # return an error instead of exit() on bad data
_EVENT_LIST_TERMINATED = 0
_EVENT_PHONEME = 7
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_RATE, _PITCH = 1, 3  # espeak_PARAMETER


class _Event(ctypes.Structure):
    """``espeak_EVENT``; ``id`` is a union whose phoneme member is ``char string[8]``."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", ctypes.c_char * 8),
    ]


_Callback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)


def _load_libraries(paths: list[Path]) -> ctypes.CDLL:
    """Load every cached shared library, dependencies first, and return libespeak-ng.

    The order is found by trying: a library whose dependencies are not loaded yet fails
    and is retried after the others, until a round loads nothing new.
    """
    pending = sorted({p for p in paths if ".so" in p.name and p.is_file()}, key=str)
    loaded: dict[str, ctypes.CDLL] = {}
    errors: dict[str, str] = {}
    while pending:
        failed = []
        for path in pending:
            try:
                loaded[path.name] = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            except OSError as err:
                failed.append(path)
                errors[path.name] = str(err)
        if len(failed) == len(pending):
            break
        pending = failed
    espeak = loaded.get("libespeak-ng.so.1")
    if espeak is None:
        reason = errors.get("libespeak-ng.so.1", "not among the cached files")
        raise DataError(f"libespeak-ng.so.1 cannot be loaded: {reason}")
    return espeak


def _declare(library: ctypes.CDLL) -> None:
    """The C signatures of the functions called (speak_lib.h), so ctypes converts each
    argument to its C type (``size_t``, pointers) rather than guessing ``int``."""
    c_int, c_uint = ctypes.c_int, ctypes.c_uint
    c_char_p, c_void_p = ctypes.c_char_p, ctypes.c_void_p
    signatures = {
        "espeak_Initialize": ([c_int, c_int, c_char_p, c_int], c_int),
        "espeak_SetSynthCallback": ([_Callback], None),
        "espeak_SetVoiceByName": ([c_char_p], c_int),
        "espeak_SetParameter": ([c_int, c_int, c_int], c_int),
        "espeak_Synth": (
            [c_void_p, ctypes.c_size_t, c_uint, c_int, c_uint, c_uint, c_void_p, c_void_p],
            c_int,
        ),
        "espeak_Synchronize": ([], c_int),
    }
    for name, (arguments, result) in signatures.items():
        function = getattr(library, name)
        function.argtypes, function.restype = arguments, result


@dataclass
class _Collected:
    chunks: list[bytes]
    phonemes: list[tuple[int, str]]


class EspeakPhonemes:
    """The cached libespeak-ng, synthesising text with its phoneme timing.

    Args:
        library: the loaded ``libespeak-ng.so.1``.
        data_parent: the folder holding ``espeak-ng-data/``.
    """

    _instance: EspeakPhonemes | None = None
    _lock = threading.Lock()

    def __init__(self, library: ctypes.CDLL, data_parent: Path) -> None:
        self.library = library
        _declare(library)
        rate = library.espeak_Initialize(
            _AUDIO_OUTPUT_SYNCHRONOUS,
            0,
            str(data_parent).encode(),
            _INITIALIZE_PHONEME_EVENTS | _INITIALIZE_DONT_EXIT,
        )
        if rate <= 0:
            raise DataError(f"libespeak-ng could not read its voice data in {data_parent}")
        self.sample_rate = int(rate)
        self._collected = _Collected([], [])
        # Kept as an attribute: ctypes frees a callback object that nothing references.
        self._callback = _Callback(self._receive)
        library.espeak_SetSynthCallback(self._callback)

    @classmethod
    def load(cls, paths: list[Path]) -> EspeakPhonemes:
        """The process's one instance, over ``ESPEAK_SOURCE.fetch()``'s files."""
        with cls._lock:
            if cls._instance is None:
                phontab = next(p for p in paths if p.name == "phontab")
                cls._instance = cls(_load_libraries(paths), phontab.parent.parent)
            return cls._instance

    def _receive(self, wav: ctypes.Array, count: int, events: ctypes.Array) -> int:
        if count > 0:
            self._collected.chunks.append(ctypes.string_at(wav, 2 * count))
        i = 0
        while events[i].type != _EVENT_LIST_TERMINATED:
            event = events[i]
            if event.type == _EVENT_PHONEME:
                name = bytes(event.id).split(b"\0")[0].decode("utf-8", errors="replace")
                self._collected.phonemes.append((int(event.sample), name))
            i += 1
        return 0  # go on synthesising

    def synthesize(
        self, text: str, voice: str, *, speed: int = 175, pitch: int = 50
    ) -> tuple[np.ndarray, int, list[tuple[int, str]]]:
        """``text`` spoken by ``voice`` (``en-us+f2``) at ``speed`` words a minute and
        ``pitch`` (0-99).

        Returns:
            ``(samples (N,) float32 in [-1, 1], rate, phonemes)``: rate is 22050; each
            phoneme is ``(first sample, mnemonic)``, in order of time.

        Raises:
            DataError: espeak-ng refused the voice or the text.
        """
        with self._lock:
            lib = self.library
            if lib.espeak_SetVoiceByName(voice.encode()) != 0:
                raise DataError(f"libespeak-ng has no voice {voice!r}")
            lib.espeak_SetParameter(_RATE, int(speed), 0)
            lib.espeak_SetParameter(_PITCH, int(pitch), 0)
            self._collected = _Collected([], [])
            data = text.encode()
            status = lib.espeak_Synth(
                data, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None
            )
            lib.espeak_Synchronize()
            if status != 0:
                raise DataError(f"libespeak-ng failed on {text!r} (status {status})")
            collected = self._collected
        samples = np.frombuffer(b"".join(collected.chunks), dtype=np.int16)
        return samples.astype(np.float32) / 32768.0, self.sample_rate, collected.phonemes
