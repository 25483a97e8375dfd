"""Upload inputs: a path, bytes, or a binary file object, read in chunks off the event loop.

A :class:`FileSource` knows its name and size before anything is read (so the size limit is checked and a
``Content-Length`` computed before sending) and can be read again from the start for a retry.
"""

from __future__ import annotations

import asyncio
import errno
import io
import mimetypes
import os
import secrets
import stat
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import BinaryIO, TypeAlias

import attrs

from .errors import InvalidArgumentType, InvalidRequest

__all__ = ["CHUNK_SIZE", "FileInput", "FileSource", "StreamBody", "multipart_body", "read_head", "sniff_content_type"]

#: What ``documents.upload`` accepts: a filesystem path, the bytes themselves, or a binary file object.
FileInput: TypeAlias = str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO

#: Read size for streaming a multipart upload (the encrypted upload reads smaller steps: ``_jwe_stream``).
CHUNK_SIZE = 256 * 1024 * 3  # 768 KiB

#: Sources smaller than this are read inline; a thread hop costs more than the read.
_INLINE_READ = 64 * 1024


@attrs.frozen(repr=False)
class FileSource:
    """One file to upload. Build it with :meth:`from_input`; read it with :meth:`chunks`."""

    name: str
    size: int
    _path: Path | None = None
    _data: memoryview | None = None
    _fileobj: BinaryIO | None = None
    _start: int = 0

    def __repr__(self) -> str:  # the content is health data: never shown
        return f"FileSource(name={self.name!r}, size={self.size})"

    @classmethod
    def from_input(cls, value: FileInput, *, filename: str | None = None, argument: str = "file") -> FileSource:
        """Inspect ``value`` without reading it; nothing is sent before this returns.

        Every bad input raises :class:`~health_async.errors.InvalidRequest` (a ``ValueError``) whose message
        starts with ``argument`` (the caller's parameter, e.g. ``file`` or ``files[2]``) and gives the reason: the
        path does not exist, is a directory or not a regular file, is not readable, is too long or holds a NUL;
        the file object is closed, not readable or not seekable; the name is not valid UTF-8. An unsupported type
        raises :class:`~health_async.errors.InvalidArgumentType` (also a ``TypeError``). Messages never name the
        file: file names can be personal data (the caller has the path; bulk results carry it as ``source``)."""
        if filename is not None:
            if not isinstance(filename, str):
                raise InvalidArgumentType(f"filename must be a str, not {type(filename).__name__}")
            if not _encodable(filename):
                raise InvalidRequest("filename is not valid UTF-8 text (it holds a lone surrogate)")
        if isinstance(value, bytes | bytearray | memoryview):
            try:
                view = memoryview(value).cast("B")
            except TypeError:
                raise InvalidArgumentType(f"{argument}: a memoryview must be C-contiguous") from None
            except ValueError:
                raise InvalidRequest(f"{argument}: the memoryview is released") from None
            return cls(name=filename or "file", size=view.nbytes, data=view)
        if isinstance(value, str | os.PathLike):
            path, size = _inspect_path(value, argument)
            if not filename and not _encodable(path.name):
                # bytes that are not UTF-8 in the name (kept by Python as surrogates): it cannot go in the upload's
                # headers, and renaming it here would hide which file it was
                raise InvalidRequest(f"{argument}: the file name is not valid UTF-8: rename the file")
            return cls(name=filename or path.name, size=size, path=path)
        if hasattr(value, "read"):
            if isinstance(value, io.TextIOBase):  # type: ignore[unreachable]
                raise InvalidArgumentType(f"{argument}: upload file objects must be opened in binary mode ('rb')")
            start, size = _inspect_fileobj(value, argument)
            raw_name = getattr(value, "name", None)
            name = filename or (Path(raw_name).name if isinstance(raw_name, str) and raw_name else "file")
            if not _encodable(name):
                raise InvalidRequest(f"{argument}: the file object's name is not valid UTF-8")
            return cls(name=name, size=size, fileobj=value, start=start)
        raise InvalidArgumentType(
            f"{argument}: cannot upload a {type(value).__name__}: pass a path, bytes or a binary file object"
        )

    @property
    def rereadable(self) -> bool:
        """True when :meth:`chunks` can be called again (for a retry)."""
        return self._fileobj is None or self._fileobj.seekable()

    async def read_all(self) -> bytes:
        """The whole content (for small files and the non-streaming paths)."""
        return b"".join([bytes(chunk) async for chunk in self.chunks()])

    async def chunks(self, chunk_size: int = CHUNK_SIZE) -> AsyncIterator[bytes | memoryview]:
        """Yield the content from the start, ``chunk_size`` bytes at a time (the last chunk may be shorter).

        File reads of more than a small size happen in a worker thread so the event loop never blocks.
        """
        if self._data is not None:
            for offset in range(0, self.size, chunk_size):
                yield self._data[offset : offset + chunk_size]
            return
        if self._path is not None:
            # No file stays open across a yield: the HTTP layer may stop pulling this body at any point (the
            # server answered early, the connection dropped) and drop the generator unclosed, which must not
            # leave a file handle to the garbage collector. Each step opens, reads and closes (a few µs per
            # 768 KiB step).
            path, offset = self._path, 0
            while offset < self.size:
                want = min(chunk_size, self.size - offset)
                if want > _INLINE_READ:
                    chunk = await asyncio.to_thread(_read_at, path, offset, want)
                else:
                    chunk = _read_at(path, offset, want)
                if not chunk:
                    raise OSError("upload file shrank while it was being read")
                offset += len(chunk)
                yield chunk
            return
        assert self._fileobj is not None
        if self._fileobj.seekable():
            self._fileobj.seek(self._start)
        async for chunk in _read_chunks(self._fileobj, chunk_size, self.size):
            yield chunk


def _inspect_path(value: str | os.PathLike[str], argument: str) -> tuple[Path, int]:
    """The path and size of a regular, readable file, or :class:`InvalidRequest` naming ``argument`` and the
    reason (never the path: the OS's own messages carry it, so they are not passed on)."""
    raw = os.fspath(value)
    if not isinstance(raw, str):
        raise InvalidArgumentType(f"{argument}: a path must be a str or os.PathLike[str], not bytes")
    if "\x00" in raw:
        raise InvalidRequest(f"{argument}: the path contains a NUL character")
    path = Path(raw)
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise InvalidRequest(f"{argument}: the upload file does not exist") from None
    except PermissionError:
        raise InvalidRequest(f"{argument}: the upload file is not readable (permission denied)") from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise InvalidRequest(f"{argument}: the path is too long") from None
        raise InvalidRequest(f"{argument}: the upload file cannot be used: {exc.strerror or 'OS error'}") from None
    except ValueError:  # any other path the OS layer refuses outright
        raise InvalidRequest(f"{argument}: the path cannot be used") from None
    if stat.S_ISDIR(info.st_mode):
        raise InvalidRequest(f"{argument}: the upload path is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise InvalidRequest(f"{argument}: the upload path is not a regular file")
    if not os.access(path, os.R_OK):
        raise InvalidRequest(f"{argument}: the upload file is not readable (permission denied)")
    return path, info.st_size


def _inspect_fileobj(value: BinaryIO, argument: str) -> tuple[int, int]:
    """Where a binary file object's content starts and how many bytes follow, or :class:`InvalidRequest`."""
    if getattr(value, "closed", False):
        raise InvalidRequest(f"{argument}: the file object is closed")
    try:
        readable = getattr(value, "readable", None)
        can_read = True if readable is None else bool(readable())
        seekable = value.seekable()
        start = value.tell() if seekable else 0
    except (OSError, ValueError):  # closed under us, or a broken stream; its message may carry the name
        raise InvalidRequest(f"{argument}: the file object cannot be read") from None
    if not can_read:
        raise InvalidRequest(f"{argument}: the file object is not open for reading")
    try:
        return start, os.fstat(value.fileno()).st_size - start
    except (OSError, AttributeError, io.UnsupportedOperation):
        pass
    if not seekable:
        raise InvalidRequest(f"{argument}: a non-seekable file object needs to be passed as bytes")
    try:
        size = value.seek(0, io.SEEK_END) - start
        value.seek(start)
    except (OSError, ValueError):
        raise InvalidRequest(f"{argument}: the file object cannot be read") from None
    return start, size


def _read_at(path: Path, offset: int, size: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(offset)
        return fh.read(size)


async def _read_chunks(fh: BinaryIO, chunk_size: int, size: int) -> AsyncIterator[bytes]:
    remaining = size
    while remaining > 0:
        want = min(chunk_size, remaining)
        chunk = await asyncio.to_thread(fh.read, want) if want > _INLINE_READ else fh.read(want)
        if not chunk:
            raise OSError("upload file shrank while it was being read")
        remaining -= len(chunk)
        yield chunk


@attrs.frozen
class StreamBody:
    """A request body produced chunk by chunk, with its exact size known up front (no chunked encoding).

    ``factory`` is called once per attempt, so a retry sends the body again from the start.
    """

    size: int
    content_type: str
    factory: Callable[[], AsyncIterator[bytes | memoryview]]
    headers: Mapping[str, str] = attrs.field(factory=dict)


def multipart_body(
    source: FileSource,
    *,
    field: str = "file",
    fields: Mapping[str, str] | None = None,
    content_type: str | None = None,
) -> StreamBody:
    """``multipart/form-data`` with one part ``field`` holding the file, streamed from ``source``.

    Framed by hand (RFC 7578) rather than with ``aiohttp.FormData`` so the exact ``Content-Length`` is known
    before sending and the file is read in chunks, never whole, on every aiohttp version.

    ``fields`` are plain text parts sent *before* the file, in their order (a presigned storage form requires
    its signed fields first: the storage stops reading at the file part). ``content_type`` is the file part's
    type (default: guessed from the name).
    """
    boundary = secrets.token_hex(16)
    if content_type is None:
        content_type = mimetypes.guess_type(source.name)[0] or "application/octet-stream"
    filename = _quote_filename(source.name)
    preamble = "".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote_filename(name)}"\r\n\r\n{value}\r\n'
        for name, value in (fields or {}).items()
    )
    head = (
        preamble + f"--{boundary}\r\n"
        f'Content-Disposition: form-data; name="{field}"; filename="{filename}"\r\n'
        f"Content-Type: {content_type}\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    async def produce() -> AsyncIterator[bytes | memoryview]:
        yield head
        async for chunk in source.chunks():
            yield chunk
        yield tail

    return StreamBody(
        size=len(head) + source.size + len(tail),
        content_type=f"multipart/form-data; boundary={boundary}",
        factory=produce,
    )


#: Leading signatures ("magic numbers") of the image types a presigned upload accepts, with the vendor's names.
_IMAGE_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpg"),  # the vendor's spelling (contentTypeJpg), not image/jpeg
)
_PDF_SIGNATURE = b"%PDF-"

#: How many leading bytes :func:`sniff_content_type` looks at (a PDF header may follow some junk, as readers allow).
SNIFF_BYTES = 1024


def sniff_content_type(head: bytes | memoryview) -> str | None:
    """The content type the first bytes of a file show (``application/pdf``, ``image/png``, ``image/jpg``),
    or ``None`` for anything else. Decided by the bytes, never by the file name: a ``.pdf`` that holds a PNG is
    a PNG. A PDF's ``%PDF-`` header is accepted within the first :data:`SNIFF_BYTES` bytes, as PDF readers do."""
    data = bytes(head[:SNIFF_BYTES])
    for magic, content_type in _IMAGE_SIGNATURES:
        if data.startswith(magic):
            return content_type
    return "application/pdf" if _PDF_SIGNATURE in data else None


async def read_head(source: FileSource, size: int = SNIFF_BYTES) -> bytes:
    """The first ``size`` bytes of ``source`` (fewer for a shorter file), for sniffing. The source must be
    re-readable (:attr:`FileSource.rereadable`): a later :meth:`FileSource.chunks` starts from the start again."""
    chunks = source.chunks(size)
    try:
        async for chunk in chunks:
            return bytes(chunk)
        return b""
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]  # closes the file of a path source at once


def _encodable(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _quote_filename(name: str) -> str:
    """A filename safe inside a quoted header parameter: no control characters, quotes or backslashes."""
    cleaned = "".join("_" if ch < " " or ch in '"\\\x7f' else ch for ch in name)
    return cleaned or "file"
