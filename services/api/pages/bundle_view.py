"""What a bundle's landing page shows: each of its passes as the pass's own page previews it
(view.py), with the pass's own buttons, and one .pkpasses for them all (docs/pages.md#pass-bundles).

Each pass keeps its template's colors: its custom properties are set on its own list item
(`.ticket-<n>`), all in the page's one inline <style>, whose hash the CSP names.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from services.api.pages.view import PassView, build_view, pass_css
from shared.models import PassRecord, TemplateRecord


@dataclass(frozen=True)
class TicketView:
    view: PassView
    apple_url: str
    google_url: str


@dataclass(frozen=True)
class BundleView:
    tickets: tuple[TicketView, ...]
    page_url: str

    @property
    def download_url(self) -> str:
        return f"{self.page_url}.pkpasses"

    @property
    def organization(self) -> str:
        return self.tickets[0].view.organization

    @property
    def addable(self) -> bool:
        """Whether any pass can still be added (voided and used-up ones cannot)."""
        return any(ticket.view.addable for ticket in self.tickets)


def build_bundle_view(
    passes: Sequence[tuple[PassRecord, TemplateRecord]],
    *,
    site_url: str,
    page_url: str,
    path_prefix: str = "",
    views: Sequence[PassView] | None = None,
) -> BundleView:
    """`passes` in the bundle's order (at least one); each pass's buttons use its permanent URLs.
    `views`: their previews when the caller made them (responses.preview), else built here."""
    tickets = []
    for index, (record, template) in enumerate(passes):
        pass_page = f"{site_url}/p/{record.short_id}"
        view = views[index] if views is not None else None
        tickets.append(
            TicketView(
                view=view or build_view(record, template, path_prefix=path_prefix),
                apple_url=f"{pass_page}/pass.pkpass",
                google_url=f"{pass_page}/google",
            )
        )
    return BundleView(tickets=tuple(tickets), page_url=page_url)


def bundle_css(bundle: BundleView) -> str:
    return "".join(
        pass_css(ticket.view, f".ticket-{position}")
        for position, ticket in enumerate(bundle.tickets, start=1)
    )
