"""What the servers (gateway, voice, REST) read and ask of the sandbox that wires them: an interface below them."""
from __future__ import annotations

from typing import Any, Optional, Protocol

from .faults import Faults
from .interactions import InteractionStore
from .state import Attachment, Channel, Guild, Message, Signal, Snowflakes, User


class World(Protocol):
    """The sandbox as its servers see it (sandbox.core.Sandbox is one); they never import core."""

    token: str
    application_id: int
    recommended_shards: int
    bot_user: User
    owner: User
    guilds: list[Guild]
    faults: Faults
    api_url: str
    gateway_url: str
    ca_pem_path: str
    _ids: Snowflakes
    _signal: Signal
    _interactions: InteractionStore
    _attachments: dict[int, Attachment]

    def guild_by_id(self, gid: int) -> Optional[Guild]: ...

    def channel_by_id(self, cid: int) -> Optional[Channel]: ...

    def user_by_id(self, uid: int) -> Optional[User]: ...

    def dm_channel(self, user: User) -> Channel: ...

    def bot_voice_channel(self, guild: Guild) -> Optional[Channel]: ...

    def commands(self, guild: Optional[Guild] = None) -> list: ...

    def attachment(self, filename: str, data: bytes, content_type: str = ..., *, size: Optional[int] = ...,
                   content_length: Any = ..., stall_s: float = ...) -> Attachment: ...

    def delete_message(self, msg: Message) -> None: ...

    async def move_member(self, member: Any, channel: Optional[Channel], guild: Optional[Guild] = None) -> None: ...

    async def _voice_state_request(self, session: Any, d: dict) -> None: ...

    def _store_commands(self, guild_id: Optional[int], body: list) -> list: ...

    def _bot_can_send(self, channel: Channel) -> bool: ...

    def _channel_message(self, msg: Message) -> None: ...

    def _dispatch_message(self, event: str, msg: Message) -> int: ...
