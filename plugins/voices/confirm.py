"""Buttons only the asking user can press: a two-button confirmation (consent, deletion), a recording's Stop."""

from __future__ import annotations

from collections.abc import Callable

import discord


class OnlyTheUser(discord.ui.View):
    """A view whose buttons answer only `user_id`; anyone else is told it is not theirs."""

    def __init__(self, user_id: int, *, timeout: float | None) -> None:
        super().__init__(timeout=timeout)
        self.user_id = user_id

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        if interaction.user.id != self.user_id:
            await interaction.response.send_message("This is not your confirmation.", ephemeral=True)
            return False
        return True


class Confirm(OnlyTheUser):
    """Waits for the user to press Confirm or Cancel; `result` is True, False or None (timed out)."""

    def __init__(self, user_id: int, confirm_label: str, *, timeout: float = 120.0) -> None:
        super().__init__(user_id, timeout=timeout)
        self.result: bool | None = None
        self.interaction: discord.Interaction | None = None
        self.confirm.label = confirm_label

    async def _decide(self, interaction: discord.Interaction, result: bool) -> None:
        self.result = result
        self.interaction = interaction
        self.stop()

    @discord.ui.button(label="Confirm", style=discord.ButtonStyle.danger, custom_id="confirm")
    async def confirm(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        await self._decide(interaction, True)

    @discord.ui.button(label="Cancel", style=discord.ButtonStyle.secondary, custom_id="cancel")
    async def cancel(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        await self._decide(interaction, False)


async def ask(interaction: discord.Interaction, text: str, confirm_label: str, *, timeout: float = 120.0
              ) -> discord.Interaction | None:
    """Ask with buttons; returns the button press's interaction on Confirm, None on Cancel or timeout."""
    view = Confirm(interaction.user.id, confirm_label, timeout=timeout)
    await interaction.response.send_message(text, view=view, ephemeral=True)
    await view.wait()
    if view.result:
        return view.interaction
    if view.interaction is not None:
        await view.interaction.response.edit_message(content="Cancelled; nothing was changed.", view=None)
    else:
        try:
            await interaction.edit_original_response(content="No answer; nothing was changed.", view=None)
        except discord.HTTPException:
            pass
    return None


class StopButton(OnlyTheUser):
    """A recording's Stop: `on_stop()` when the user presses it (the recording then ends and is registered)."""

    def __init__(self, user_id: int, on_stop: Callable[[], None]) -> None:
        super().__init__(user_id, timeout=None)  # the recording has its own end
        self.on_stop = on_stop

    @discord.ui.button(label="Stop", style=discord.ButtonStyle.primary, custom_id="stop")
    async def press(self, interaction: discord.Interaction, _button: discord.ui.Button) -> None:
        self.on_stop()
        await interaction.response.edit_message(content="Stopped.", view=None)
