"""Tab completion for the %sb_* magics, through IPython's own completer (so JupyterLab, Notebook 7,
VS Code and Databricks all get it): one Matcher API v2 matcher, added by ``%load_ext sbnotebook``.

- an entity argument: the queues and topics of the live connection, ``topic/`` its subscriptions
  (and their dead-letter queues), ``NAME:`` the entities of a named connection, and the names
  themselves (``prod:``);
- ``--``: the command's options, from its argparse spec; an option's or a positional's choices
  (``%sb_settle <Tab>``: its actions).

Names come from a cache per live connection (:class:`EntityNames`), fresh for ``TTL`` seconds and
refreshed in the background after that (and at once by ``%sb_entities``, and by entities created
or deleted through the kit: ``LiveConnection.entity_changes``, which core.manage counts up). A
completion with nothing cached starts the listing and waits for it at most ``WAIT`` seconds (about
one round trip far from the namespace); past that it offers what it has (nothing) and the next Tab
finds the names. A completion never raises and never prints: anything that goes wrong offers nothing
(logged once).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...core import EntityPath, LiveConnection
from .command import PARSERS, Parser

if TYPE_CHECKING:
    from .state import MagicsState

log = logging.getLogger("sbnotebook.notebook.completion")

TTL = 30.0  # seconds names are fresh; older ones are offered while a refresh runs in the background
WAIT = 0.1  # the longest a completion waits for names it has none of (about one round trip at 80 ms)
ENTITY_ARGUMENTS = {"entity", "source", "target"}  # positional or option dests that name an entity
ENTITY_WORDS = {"show", "update", "delete", "rules"}  # %sb_entities WORD ENTITY
_LINE = re.compile(r"^\s*(?:[\w.\[\]'\"]+\s*=\s*)?%{1,2}(sb_\w+)\s(.*)$", re.DOTALL)


def _spawn(work: Callable[[], Any]) -> concurrent.futures.Future[Any]:
    """``work`` on a daemon thread of its own: a listing that hangs (a namespace gone quiet) never
    holds up the kernel's exit, as a pool's worker would."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, name="sbnotebook-names", daemon=True).start()
    return future


class EntityNames:
    """The entity names of one live connection, from the administration API: queues and topics
    (one listing, both asked at once) and each topic's subscriptions (listed after the topics, in
    the background, so ``topic/<Tab>`` finds them)."""

    def __init__(self, conn: LiveConnection) -> None:
        self.conn = conn
        self._lock = threading.Lock()
        self._top: tuple[float, list[str], list[str]] | None = None  # (when, queues, topics)
        self._changes = conn.entity_changes  # core.create_entity / delete_entity count up: list again
        self._subs: dict[str, tuple[float, list[str]]] = {}
        self._running: dict[str, concurrent.futures.Future[Any]] = {}
        self.failures = 0

    # ------------------------------------------------------------------ what completions ask

    def top(self, wait: float = WAIT) -> tuple[list[str], list[str]]:
        """(queues, topics): cached, else what a listing brings within ``wait`` seconds."""
        if self._changes != self.conn.entity_changes:  # created or deleted (a command, a panel, code)
            self._changes = self.conn.entity_changes
            self.refresh()
        with self._lock:
            cached = self._top
        if cached is None or time.monotonic() - cached[0] > TTL:
            future = self._start("", self._list_top)
            if cached is None:
                _wait(future, wait)
                with self._lock:
                    cached = self._top
        return (cached[1], cached[2]) if cached is not None else ([], [])

    def subscriptions(self, topic: str, wait: float = WAIT) -> list[str]:
        key = topic.lower()
        with self._lock:
            cached = self._subs.get(key)
        if cached is None or time.monotonic() - cached[0] > TTL:
            future = self._start(key, lambda: self._list_subscriptions(topic))
            if cached is None:
                _wait(future, wait)
                with self._lock:
                    cached = self._subs.get(key)
        return cached[1] if cached is not None else []

    def refresh(self) -> None:
        """Names changed (or were listed): list again in the background."""
        with self._lock:
            self._subs.clear()
        self._start("", self._list_top)

    def fill(self, queues: list[str], topics: dict[str, list[str]]) -> None:
        """Names another command listed (``%sb_entities``): the cache takes them as they are."""
        now = time.monotonic()
        with self._lock:
            self._top = (now, sorted(queues), sorted(topics))
            self._subs = {t.lower(): (now, sorted(subs)) for t, subs in topics.items()}

    # ------------------------------------------------------------------ listing (background)

    def _start(self, key: str, work: Callable[[], None]) -> concurrent.futures.Future[Any]:
        with self._lock:
            running = self._running.get(key)
            if running is not None and not running.done():
                return running
            future = _spawn(functools.partial(self._quietly, work))
            self._running[key] = future
            return future

    def _quietly(self, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as exc:  # a completion offers nothing; the reason is logged once
            self.failures += 1
            self.conn.info_once("completion-names", "completion: cannot list the entities of %s: %r", self.conn, exc)

    def _list_top(self) -> None:
        admin = self.conn.admin()
        topics_future = _spawn(lambda: [t.name for t in admin.list_topics()])  # both at once: one round trip
        queues = [q.name for q in admin.list_queues()]
        topics = topics_future.result()
        with self._lock:
            self._top = (time.monotonic(), sorted(queues), sorted(topics))
        for topic in topics:  # so that topic/<Tab> finds them
            self._start(topic.lower(), functools.partial(self._list_subscriptions, topic))

    def _list_subscriptions(self, topic: str) -> None:
        subs = [s.name for s in self.conn.admin().list_subscriptions(topic)]
        with self._lock:
            self._subs[topic.lower()] = (time.monotonic(), sorted(subs))


def _wait(future: concurrent.futures.Future[Any], seconds: float) -> None:
    try:
        future.result(timeout=seconds)
    except Exception:  # not there in time (or failed: logged by _quietly): offer what there is
        return


class Completer:
    """The matcher: reads the line up to the cursor and offers what fits (see the module docstring)."""

    matcher_api_version = 2
    matcher_priority = 1.0
    matcher_identifier = "sbnotebook"

    def __init__(self, magics: MagicsState) -> None:
        self.magics = magics
        self.names: dict[LiveConnection, EntityNames] = {}
        self.__qualname__ = self.matcher_identifier  # IPython reads it to name a matcher
        self._parsers = {p.prog.lstrip("%"): p for p in PARSERS}
        self._failed = False

    def __call__(self, context: Any) -> dict[str, Any]:
        try:
            return self.complete(context.text_until_cursor)
        except Exception as exc:  # never raise into the completer, never print; logged once
            (log.debug if self._failed else log.info)("completion failed: %r", exc)
            self._failed = True
            return {"completions": [], "suppress": False}

    # ------------------------------------------------------------------ names

    def names_of(self, conn: LiveConnection) -> EntityNames:
        found = self.names.get(conn)
        if found is None:
            found = self.names[conn] = EntityNames(conn)
        return found

    # ------------------------------------------------------------------ the line

    def complete(self, before: str) -> dict[str, Any]:
        from IPython.core.completer import SimpleCompletion

        found = _LINE.match(before)  # the line up to the cursor
        if found is None:
            return {"completions": [], "suppress": False}
        parser = self._parsers.get(found.group(1))
        if parser is None:
            return {"completions": [], "suppress": False}
        rest = found.group(2)
        words = rest.split()
        fragment = "" if not words or rest[-1:].isspace() else words[-1]
        prior = words if fragment == "" else words[:-1]
        offered, suppress = self.offer(parser, prior, fragment)
        if suppress and not offered and fragment:
            # Nothing fits (a typo, a name not listed yet): the word itself, so that IPython's other
            # matchers (Python names, files) stay quiet and Tab changes nothing.
            offered = [fragment]
        return {
            "completions": [SimpleCompletion(text, type="sbnotebook") for text in offered],
            "matched_fragment": fragment,
            "suppress": suppress,
            "ordered": True,
        }

    def offer(self, parser: Parser, prior: list[str], fragment: str) -> tuple[list[str], bool]:
        """What fits ``fragment`` after the words ``prior``, and whether other matchers stay quiet."""
        options = parser.options()
        if fragment.startswith("-"):
            return sorted(
                o for o in options if o.startswith(fragment) and (o.startswith("--") or fragment != "-")
            ), True
        expecting: argparse.Action | None = None
        positionals = parser.positionals()
        index = 0
        for word in prior:
            if expecting is not None:
                expecting = None
                continue
            action = options.get(word.split("=", 1)[0]) if word.startswith("-") else None
            if action is not None:
                if action.nargs != 0 and "=" not in word:
                    expecting = action
                continue
            index += 1
        if expecting is not None:
            return self.for_action(expecting, fragment, prior)
        if not positionals:
            return [], False
        if index >= len(positionals):
            if positionals[-1].nargs not in ("*", "+"):
                return [], False
            index = len(positionals) - 1
        action = positionals[index]
        if action.dest == "words":  # %sb_entities WORD [ENTITY]: the word, then an entity
            return self.entity_words(prior, fragment)
        return self.for_action(action, fragment, prior)

    def for_action(self, action: argparse.Action, fragment: str, prior: list[str]) -> tuple[list[str], bool]:
        if action.choices:
            return [str(c) for c in action.choices if str(c).startswith(fragment)], True
        if action.dest in ENTITY_ARGUMENTS:
            return self.entities(fragment), True
        if action.dest == "connection":  # %sb_entities --connection NAME
            return [n for n in sorted(self.magics.connections) if n.startswith(fragment)], True
        return [], False  # a file, an expression: other matchers may know (file names)

    def entity_words(self, prior: list[str], fragment: str) -> tuple[list[str], bool]:
        words = [w for w in prior if not w.startswith("-")]
        if not words:
            verbs = ["show", "create", "update", "delete", "rules", "rule"]
            named = [f"{n}:" for n in sorted(self.magics.connections)]  # %sb_entities prod: lists prod's
            return [v for v in [*verbs, *named] if v.startswith(fragment)], True
        if len(words) == 1 and words[0] in ENTITY_WORDS:
            return self.entities(fragment), True
        return [], False

    def entities(self, fragment: str) -> list[str]:
        """Entity names that start with ``fragment`` (case-insensitive, as Service Bus is)."""
        if ":" in fragment:
            name, rest = fragment.split(":", 1)
            conn = self.magics.connections.get(name)
            prefix = f"{name}:"
            named: list[str] = []
        else:
            conn, rest, prefix = self.magics.connection, fragment, ""
            named = [f"{n}:" for n in sorted(self.magics.connections) if n.startswith(fragment)]
        if conn is None:  # no live connection yet: a completion does not open one
            return named
        names = self.names_of(conn)
        lowered = rest.lower()
        if "/" not in rest:
            queues, topics = names.top()
            found = sorted({*queues, *topics}, key=str.lower)
            return [prefix + n for n in found if n.lower().startswith(lowered)] + named
        head = rest.split("/", 1)[0]
        queues, topics = names.top()
        candidates: list[str] = []
        if any(q.lower() == head.lower() for q in queues):
            candidates.append(str(EntityPath(head).dead_letter))
        if any(t.lower() == head.lower() for t in topics):
            for sub in names.subscriptions(head):
                path = f"{head}/subscriptions/{sub}"
                candidates.append(path)
                if lowered.startswith(path.lower()):
                    candidates.append(str(EntityPath(head, sub).dead_letter))
        return [prefix + c for c in candidates if c.lower().startswith(lowered)]


def install(shell: Any, magics: MagicsState) -> Completer:
    """Add the matcher to the shell's completer (once)."""
    uninstall(shell)
    completer = Completer(magics)
    shell.Completer.custom_matchers.append(completer)
    return completer


def uninstall(shell: Any) -> None:
    matchers = getattr(getattr(shell, "Completer", None), "custom_matchers", None)
    if matchers is not None:
        matchers[:] = [m for m in matchers if not isinstance(m, Completer)]
