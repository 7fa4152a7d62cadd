"""Cassettes: record a provider's answers once, replay them offline and deterministically.

Owns the cassette file format, the canonical key of a request, the normalisation of
machine-specific text (so a cassette recorded in one folder or on one machine replays in
another), and the two providers built on them: :func:`record` wraps any provider and appends
each answered request to a cassette; :func:`replay` serves those answers with no network and no
API key, at the recorded pace times ``speed``. Knows nothing of sessions, tools or Jupyter.

Format: a JSON-lines file, mode 0600. The first line is a header (``{"kind": "header", "v":
1, ...}``); each later line is one answered model call (``"kind": "call"``: the key, the
normalised request, the streamed events with their time offsets, and the final message with
usage and stop reason), a token count (``"kind": "count"``), or a tool list or a message
stored once and referenced by hash from the calls (``"kind": "tools"`` / ``"message"``, so a
cassette grows with what the conversation adds, not with the square of its length). A
cassette never holds an API key or an HTTP header: only what the agent put in the request,
and what the model answered.

Key: a SHA-256 of the canonical JSON of the normalised request's model, system prompt, tool
specs and messages (``cache_control`` marks dropped, string contents as text blocks, keys
sorted). ``max_tokens`` is not part of it. Normalised: the workdir's absolute path, the Python
environment's prefix, the home folder, the temporary folder and the host name are replaced by
placeholders such as ``⟨workdir⟩``; replay puts the local values back into the answers, so a
model that wrote ``/home/ann/demo/a.txt`` writes ``/Users/bob/class/a.txt`` in class.

The same request may have been answered several times (the same prompt in two sessions):
replay serves its answers in recorded order and repeats the last one when they run out.

The modules, one job each (private: the names re-exported below are the public surface):
``_keys`` normalises a request and computes its key, ``_file`` writes and reads the file,
``_check`` checks every line read (a cassette is untrusted input), ``_record`` and ``_replay``
are the two providers, and ``_mismatch`` explains a request that replay does not find.
"""

from ._file import CASSETTE_VERSION
from ._keys import Normaliser, request_key
from ._record import RecordingProvider, record
from ._replay import ReplayProvider, replay

__all__ = [
    "CASSETTE_VERSION",
    "Normaliser",
    "RecordingProvider",
    "ReplayProvider",
    "record",
    "replay",
    "request_key",
]
