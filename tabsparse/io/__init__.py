"""Model files that never run code on load (the serving layer's file format).

A model file is a zip archive of ``tabsparse.json`` (plain JSON), ``weights.safetensors`` (the
network tensors) and ``SHA256SUMS`` (the integrity check over both); see
``docs/model_files.md``. This package is the file format only: how an estimator becomes a
:class:`ModelPayload` and back lives in the estimator layer
(``tabsparse.estimators._persistence``, which also holds the allow-list of classes), and this
package never imports the estimators. :func:`save` and :func:`load` here take that registry;
:func:`tabsparse.save` and :func:`tabsparse.load` supply it.

Modules: ``_archive`` (zip container, atomic write, checksums), ``_values`` (typed JSON values),
``_format`` (the current format, payloads, save / load), ``_legacy`` (reading format_version 1).

Its modules:

================  ======================================================================
:mod:`._format`   a :class:`ModelPayload` to and from a file: :func:`save`, :func:`load`
:mod:`._archive`  the zip container, written atomically
:mod:`._values`   typed JSON values, checked on the way back
:mod:`._errors`   :class:`ModelFileError` and the problems behind it
:mod:`._legacy`   reading format_version 1 files
================  ======================================================================
"""

from tabsparse.io._archive import CHECKSUM_MEMBER
from tabsparse.io._errors import FileProblem, ModelFileError
from tabsparse.io._format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    JSON_MEMBER,
    WEIGHTS_MEMBER,
    EstimatorCodec,
    ModelPayload,
    load,
    read_model_file,
    save,
    use_registry,
    write_model_file,
)
from tabsparse.io._values import NotStorable, decode_value, encode_value

ModelFileError.__module__ = "tabsparse.io"  # its public home (messages, pickles)

__all__ = [
    "CHECKSUM_MEMBER",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "JSON_MEMBER",
    "WEIGHTS_MEMBER",
    "EstimatorCodec",
    "FileProblem",
    "ModelFileError",
    "ModelPayload",
    "NotStorable",
    "decode_value",
    "encode_value",
    "load",
    "read_model_file",
    "save",
    "use_registry",
    "write_model_file",
]
