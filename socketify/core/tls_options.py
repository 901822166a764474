"""`TlsOptions`: what a server needs to speak HTTPS; validated when the server starts.

The value holds paths and choices only; `build_context()` turns it into an `ssl.SSLContext`
(certificate chain, key, minimum version, ciphers, client certificates, SNI, ALPN). Bad paths
or a key that does not match its certificate fail there with a clear `TlsError`, so a
misconfigured server refuses to start instead of failing on the first handshake.
"""

from __future__ import annotations

import os
import ssl
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ServerSslObject", "TlsError", "TlsOptions"]

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsError(Exception):
    """The TLS configuration cannot be used (missing files, mismatched key, bad option)."""


class ServerSslObject(ssl.SSLObject):
    """The TLS session of one connection, which remembers the SNI name its client sent."""

    server_name: str | None = None  # set during the handshake by the context's SNI callback


@dataclass(frozen=True)
class TlsOptions:
    """HTTPS settings: certificate and key files, and the policy around them."""

    cert_file: str
    key_file: str
    min_version: str = "TLSv1.2"
    ciphers: str | None = None
    ca_file: str | None = None  # trusted CAs for client certificates (mTLS)
    client_auth: str = "none"  # "none" | "optional" | "required"
    sni: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # host -> (cert, key)
    # The ALPN protocols offered, in our order of preference; None: h2 and http/1.1 when the
    # server speaks HTTP/2, http/1.1 alone otherwise. "h2" is never offered without HTTP/2.
    alpn: tuple[str, ...] | None = None
    # The passphrase of an encrypted key file (the same for the SNI keys); kept out of repr.
    key_password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.min_version not in _VERSIONS:
            raise TlsError(
                f"min_version must be one of {sorted(_VERSIONS)}, not {self.min_version!r}"
            )
        if self.client_auth not in _CLIENT_AUTH:
            raise TlsError(
                f"client_auth must be none, optional or required, not {self.client_auth!r}"
            )
        if self.client_auth != "none" and not self.ca_file:
            raise TlsError("client_auth needs ca_file: the CAs that sign client certificates")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TlsOptions | None:
        """From SOCKETIFY_CERT_FILE and SOCKETIFY_KEY_FILE; None unless both are set."""
        env = os.environ if environ is None else environ
        cert, key = env.get("SOCKETIFY_CERT_FILE", ""), env.get("SOCKETIFY_KEY_FILE", "")
        return cls(cert_file=cert, key_file=key) if cert and key else None

    def protocols(self, http2: bool) -> tuple[str, ...]:
        """The ALPN protocols to offer; `http2` says whether the server speaks HTTP/2."""
        if self.alpn is not None:
            return tuple(name for name in self.alpn if http2 or name != "h2")
        return ("h2", "http/1.1") if http2 else ("http/1.1",)

    def build_context(self, http2: bool = False) -> ssl.SSLContext:
        """A server-side SSLContext for these options; raises TlsError with the reason.

        `http2`: the server speaks HTTP/2, so ALPN may choose it.
        """
        protocols = self.protocols(http2)
        context = self._context(self.cert_file, self.key_file, protocols)
        # Each name's context offers ALPN too: OpenSSL asks the one SNI switched to.
        by_host = {
            host.lower(): self._context(cert, key, protocols)
            for host, (cert, key) in self.sni.items()
        }

        def select(sock: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
            # The name is kept for the request (per-host routers read it): the handshake is
            # the only moment OpenSSL tells a server which name its client asked for.
            if isinstance(sock, ServerSslObject):
                sock.server_name = server_name
            chosen = by_host.get((server_name or "").lower())
            if chosen is not None:
                sock.context = chosen

        context.sslobject_class = ServerSslObject
        _set_sni_callback(context, select)
        return context

    def _context(self, cert_file: str, key_file: str, protocols: tuple[str, ...]) -> ssl.SSLContext:
        # Looked up at call time: under gevent this is its patched subclass, whose property
        # setters work (the standard library's refer to the module name that gevent replaced).
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = _VERSIONS[self.min_version]
        context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
        for path, what in ((cert_file, "certificate"), (key_file, "key")):
            if not os.path.isfile(path):
                raise TlsError(f"TLS {what} file not found: {path}")
        try:
            context.load_cert_chain(cert_file, key_file, password=self._password)
        except (ssl.SSLError, OSError) as exc:
            raise TlsError(f"cannot load {cert_file} with {key_file}: {exc}") from None
        if self.ciphers:
            try:
                context.set_ciphers(self.ciphers)
            except ssl.SSLError as exc:
                raise TlsError(f"invalid cipher list {self.ciphers!r}: {exc}") from None
        if self.client_auth != "none":
            assert self.ca_file is not None
            try:
                context.load_verify_locations(self.ca_file)
            except (ssl.SSLError, OSError) as exc:
                raise TlsError(f"cannot load client CA file {self.ca_file}: {exc}") from None
            context.verify_mode = _CLIENT_AUTH[self.client_auth]
        if protocols:
            context.set_alpn_protocols(list(protocols))
        return context

    def _password(self) -> str:
        # Called by OpenSSL only for an encrypted key; without a passphrase it would
        # otherwise prompt on the terminal, and a server has no one there to answer.
        if self.key_password is None:
            raise TlsError("the TLS key file is encrypted: give its passphrase as key_password")
        return self.key_password


def _set_sni_callback(context: ssl.SSLContext, callback: Any) -> None:
    """Install `callback` through the C-level `sni_callback` attribute of the context's class.

    gevent's patched SSLContext wraps a callback set the usual way so that it receives an
    SSLSocket, which fails (and so fails every handshake) on the SSLObject of a memory-BIO
    connection, which is what the server uses; the C attribute further up the class's bases
    takes the callback as it is.
    """
    for cls in type(context).__mro__:
        attribute = vars(cls).get("sni_callback")
        if isinstance(attribute, types.GetSetDescriptorType):
            attribute.__set__(context, callback)
            return
    context.sni_callback = callback
