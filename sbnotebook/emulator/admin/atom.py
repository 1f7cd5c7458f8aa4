"""The administration API's envelopes: ATOM entries and feeds (with the paging link the SDK
follows), namespace info, errors, and the description a request's body carries. No HTTP here
(``api.py`` serves these); the entities' own documents are in ``documents.py``, rules in
``rulexml.py``."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any
from xml.sax.saxutils import escape

from .documents import SB, XSI, stamp
from .properties import local_name

ATOM = "http://www.w3.org/2005/Atom"


def entry(base: str, path: str, title: str, content: str) -> str:
    url = f"{base}/{path}"
    return (
        f'<entry xmlns="{ATOM}"><id>{escape(url)}</id><title type="text">{escape(title)}</title>'
        f"<published>{stamp()}</published><updated>{stamp()}</updated>"
        f'<link rel="self" href="{escape(url)}"/>'
        f'<content type="application/xml">{content}</content></entry>'
    )


def feed(base: str, path: str, entries: list[str], next_skip: int | None = None, top: int = 100) -> str:
    url = f"{base}/{path}"
    links = f'<link rel="self" href="{escape(url)}"/>'
    if next_skip is not None:  # the SDK pages by following a second link
        links += f'<link rel="next" href="{escape(f"{url}?$skip={next_skip}&$top={top}")}"/>'
    return (
        f'<feed xmlns="{ATOM}"><title type="text">{escape(path)}</title><id>{escape(url)}</id>'
        f"<updated>{stamp()}</updated>{links}{''.join(entries)}</feed>"
    )


def parse_description(body: bytes) -> ET.Element:
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise ValueError(f"the request body is not XML: {exc}") from None
    for el in root.iter():
        if local_name(el.tag).endswith("Description"):
            return el
    raise ValueError("the request body holds no entity description")


class Page(list[Any]):
    next_skip: int | None = None
    top: int = 100


def page(items: list[Any], query: dict[str, list[str]]) -> Page:
    skip = int((query.get("$skip") or ["0"])[0])
    top = int((query.get("$top") or ["100"])[0])
    page = Page(items[skip : skip + top])
    page.top = top
    page.next_skip = skip + top if skip + top < len(items) else None
    return page


def namespace_xml(name: str) -> str:
    return (
        f'<NamespaceInfo xmlns="{SB}" xmlns:i="{XSI}"><CreatedTime>{stamp()}</CreatedTime>'
        f"<MessagingSKU>Standard</MessagingSKU><ModifiedTime>{stamp()}</ModifiedTime>"
        f"<Name>{escape(name)}</Name><NamespaceType>Messaging</NamespaceType></NamespaceInfo>"
    )


def error_xml(status: int, message: str) -> str:
    return f"<Error><Code>{status}</Code><Detail>{escape(message)}</Detail></Error>"
