"""The voice server's MLS external sender (rfc9420): the op 25 package, signed Add/Remove proposals, commit parsing."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Optional

from cryptography.hazmat.primitives.asymmetric import ec
from rfc9420 import DefaultCryptoProvider
from rfc9420.codec.tls import read_opaque_varint, write_opaque_varint
from rfc9420.crypto.ciphersuites import CipherSuiteId
from rfc9420.messages.data_structures import AddProposal, Commit, ProposalOrRefType, RemoveProposal, SenderType
from rfc9420.messages.messages import (
    ContentType,
    FramedContent,
    FramedContentAuthData,
    MLSMessage,
    WireFormat,
    sign_authenticated_content,
)
from rfc9420.messages.refs import make_proposal_ref

_KEY_PACKAGE_WIRE_FORMAT = b"\x00\x01\x00\x05"      # MLSMessage(mls10, mls_key_package) prefix
_BASIC_CREDENTIAL = 1


@dataclass
class Proposal:
    """One proposal the server signed: the MLSMessage bytes and its ProposalRef."""
    kind: str                    # "add" | "remove"
    user_id: int                 # who is added or removed
    message: bytes
    ref: bytes


@dataclass
class CommitWelcome:
    """A client's op 28 payload, split: the commit MLSMessage, the Welcome (if any), what it commits."""
    commit: bytes
    welcome: Optional[bytes]
    epoch: int
    group_id: bytes
    refs: list[bytes]


def group_id(channel_id: int) -> bytes:
    """DAVE's MLS group id: the voice channel id as 8 big-endian bytes."""
    return channel_id.to_bytes(8, "big")


class ExternalSender:
    """The voice server's signing identity (cipher suite 2: P-256) and the messages it signs."""

    def __init__(self, identity: bytes = b"sandbox-voice") -> None:
        self.crypto = DefaultCryptoProvider(CipherSuiteId.MLS_128_DHKEMP256_AES128GCM_SHA256_P256)
        key = ec.generate_private_key(ec.SECP256R1())
        self._private = key.private_numbers().private_value.to_bytes(32, "big")
        self.public = self.crypto.signature_public_from_private(self._private)
        self.identity = identity

    def package(self) -> bytes:
        """Op 25 payload: ExternalSender { signature_key<V>; Credential(basic, identity<V>) }."""
        return write_opaque_varint(self.public) + struct.pack(">H",
                                                              _BASIC_CREDENTIAL) + write_opaque_varint(self.identity)

    def _sign(self, channel_id: int, epoch: int, content: bytes, kind: str, user_id: int) -> Proposal:
        plain = sign_authenticated_content(group_id(channel_id), epoch, 0, b"", ContentType.PROPOSAL, content,
                                           self._private, self.crypto, sender_type=SenderType.EXTERNAL,
                                           wire_format=WireFormat.PUBLIC_MESSAGE)
        auth = plain.auth_content
        ref = make_proposal_ref(self.crypto, auth.serialize_authenticated_content())
        return Proposal(kind, user_id, MLSMessage.from_public_message(auth).serialize(), ref)

    def add(self, channel_id: int, epoch: int, user_id: int, key_package: bytes) -> Proposal:
        """An Add of the client's key package (op 26 payload; an MLSMessage wrapper is unwrapped)."""
        if key_package.startswith(_KEY_PACKAGE_WIRE_FORMAT):
            key_package = key_package[len(_KEY_PACKAGE_WIRE_FORMAT):]
        return self._sign(channel_id, epoch, AddProposal(key_package).serialize(), "add", user_id)

    def remove(self, channel_id: int, epoch: int, user_id: int, leaf: int) -> Proposal:
        return self._sign(channel_id, epoch, RemoveProposal(leaf).serialize(), "remove", user_id)


def proposals_payload(proposals: list[Proposal]) -> bytes:
    """Op 27 append body after the optype byte: MLSMessage proposal_messages<V>."""
    return write_opaque_varint(b"".join(p.message for p in proposals))


def revoke_payload(proposals: list[Proposal]) -> bytes:
    """Op 27 revoke body after the optype byte: ProposalRef proposal_refs<V> (each ref an opaque<V>)."""
    return write_opaque_varint(b"".join(write_opaque_varint(p.ref) for p in proposals))


def parse_commit_welcome(blob: bytes) -> CommitWelcome:
    """Split an op 28 payload (commit MLSMessage followed by an optional Welcome); raises ValueError when malformed."""
    try:
        msg = MLSMessage.deserialize(blob)
        if msg.wire_format != WireFormat.PUBLIC_MESSAGE:
            raise ValueError(f"commit is not a PublicMessage (wire format {msg.wire_format})")
        body = msg.content
        framed = FramedContent.deserialize(body)
        if framed.content_type != ContentType.COMMIT:
            raise ValueError("op 28 does not carry a commit")
        off = len(framed.serialize())
        _auth, used = FramedContentAuthData.deserialize(body[off:], framed.content_type)
        off += used
        if framed.sender.sender_type == SenderType.MEMBER:
            _tag, off = read_opaque_varint(body, off)
        commit = Commit.deserialize(framed.content)
    except ValueError:
        raise
    except Exception as exc:          # rfc9420 raises its own decode errors
        raise ValueError(f"malformed commit: {exc}") from exc
    end = 4 + off
    refs = [p.reference for p in commit.proposals if p.typ == ProposalOrRefType.REFERENCE]
    if len(refs) != len(commit.proposals):
        raise ValueError("commit carries proposals by value; the voice server only accepts its own references")
    return CommitWelcome(blob[:end], blob[end:] or None, framed.epoch, framed.group_id, refs)
