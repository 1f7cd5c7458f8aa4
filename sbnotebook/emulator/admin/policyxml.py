"""A queue's or topic's shared access policies in the administration API's XML (Service Bus calls
them ``AuthorizationRules``): read from a create or update, written into the entity's description.

A policy, as the SDKs send it::

    <AuthorizationRule i:type="SharedAccessAuthorizationRule">
      <ClaimType>SharedAccessKey</ClaimType><ClaimValue>None</ClaimValue>
      <Rights><AccessRights>Listen</AccessRights></Rights>
      <KeyName>reader</KeyName><PrimaryKey>...</PrimaryKey><SecondaryKey>...</SecondaryKey>
    </AuthorizationRule>

What Service Bus would not take is refused (400) saying which policy and why; a key is never quoted.
The SDKs' own checks decide here (the .NET SDK's ``SharedAccessAuthorizationRule``): a key
name of 1 to 256 URL-safe characters, rights unique with Manage only beside Send and Listen, keys of
44 base64 characters. A policy without its ``i:type`` is refused: Service Bus answered such policies
(azure-servicebus before 7.14.1 left it out) with a 400. A key the entity's policy of that name
already holds is not judged again (keys of the topology file or ``Emulator.add_policy``).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import UTC, datetime
from xml.sax.saxutils import escape

from ..security.sas import RIGHTS, Policy, is_service_bus_key, rights_of
from .limits import refuse
from .properties import local_name

XSI = "http://www.w3.org/2001/XMLSchema-instance"
RULE_TYPE = "SharedAccessAuthorizationRule"
CLAIM_TYPE, CLAIM_VALUE = "SharedAccessKey", "None"
MAX_RULES = 12  # Service Bus's quota of SAS rules per namespace, queue or topic
_KEY_NAME = re.compile(r"^[A-Za-z0-9._\-!*()]{1,256}$")  # what URL-encoding leaves as it is
_FIELDS = {"ClaimType", "ClaimValue", "Rights", "CreatedTime", "ModifiedTime", "KeyName", "PrimaryKey", "SecondaryKey"}


def policies_from(el: ET.Element | None, entity: str, held: Sequence[Policy], now: datetime) -> tuple[Policy, ...]:
    """The policies an ``AuthorizationRules`` element declares for ``entity``; none when it is left
    out (an update replaces the description). ``held``: the entity's policies until now."""
    rules = list(el) if el is not None else []
    if len(rules) > MAX_RULES:
        raise refuse(f"An entity can have at most {MAX_RULES} authorization rules; {len(rules)} were given.")
    out: list[Policy] = []
    for i, rule in enumerate(rules):
        policy = _policy(rule, i, entity, {p.name.lower(): p for p in held}, now)
        if any(p.name.lower() == policy.name.lower() for p in out):
            raise refuse(f"The authorization rule '{policy.name}' is given twice.")
        out.append(policy)
    return tuple(out)


def _policy(rule: ET.Element, index: int, entity: str, held: dict[str, Policy], now: datetime) -> Policy:
    fields = {local_name(child.tag): child for child in rule}
    text = {name: (child.text or "").strip() for name, child in fields.items()}
    name = text.get("KeyName", "")
    where = f"The authorization rule '{name}'" if _KEY_NAME.match(name) else f"Authorization rule {index + 1}"
    if local_name(rule.tag) != "AuthorizationRule" or (rule.get(f"{{{XSI}}}type") or "").split(":")[-1] != RULE_TYPE:
        sdk = f'AuthorizationRule(type="{RULE_TYPE}", ...) in azure-servicebus'
        raise refuse(f'{where} needs i:type="{RULE_TYPE}" ({sdk}).')
    unknown = sorted(set(fields) - _FIELDS)
    if unknown:
        raise refuse(f"{where} has unsupported properties: {', '.join(unknown)}.")
    if not _KEY_NAME.match(name):
        raise refuse(f"{where} needs a KeyName of 1 to 256 letters, digits or ._-!*() characters.")
    if text.get("ClaimType", CLAIM_TYPE) != CLAIM_TYPE or text.get("ClaimValue", CLAIM_VALUE) != CLAIM_VALUE:
        raise refuse(f"{where}: a shared access policy has ClaimType '{CLAIM_TYPE}' and ClaimValue '{CLAIM_VALUE}'.")
    listed = _rights(fields.get("Rights"), where)
    before = held.get(name.lower())
    keys = [_key(text.get(which, ""), which, where, before) for which in ("PrimaryKey", "SecondaryKey")]
    created = modified = now
    if before is not None:  # the same rule again: its creation time stays, and its change time unless it changed
        created = before.created_at or now
        same = (before.primary_key, before.secondary_key) == tuple(keys) and before.rights == rights_of(listed)
        modified = (before.modified_at or created) if same else now
    return Policy(
        name, keys[0], keys[1], rights_of(listed), entity, listed=listed, created_at=created, modified_at=modified
    )


def _rights(el: ET.Element | None, where: str) -> tuple[str, ...]:
    listed = tuple((child.text or "").strip() for child in (el if el is not None else ()))
    if not listed or len(set(listed)) != len(listed) or any(r not in RIGHTS for r in listed):
        raise refuse(f"{where} needs Rights: one or more of {', '.join(RIGHTS)}, each once.")
    if "Manage" in listed and len(listed) != len(RIGHTS):
        raise refuse(f"{where}: Manage permission should also include Send and Listen.")
    return listed


def _key(key: str, which: str, where: str, before: Policy | None) -> str:
    if before is not None and key in (before.primary_key, before.secondary_key):
        return key  # already held: not judged again
    if not key:
        raise refuse(f"{where} needs a {which} (a 44-character base64 key, 32 random bytes).")
    if not is_service_bus_key(key):
        raise refuse(f"{where}: its {which} is not a 44-character base64 key (32 random bytes), as Service Bus takes.")
    return key


def authorization_rules_xml(policies: Sequence[Policy], started: datetime) -> str:
    """The ``AuthorizationRules`` element of a queue's or topic's description (keys included: the
    API answers only callers with Manage, as Service Bus shows keys to those who may list them)."""
    return "<AuthorizationRules>" + "".join(_rule_xml(p, started) for p in policies) + "</AuthorizationRules>"


def _rule_xml(p: Policy, started: datetime) -> str:
    rights = "".join(f"<AccessRights>{r}</AccessRights>" for r in p.rights_listed)
    created = p.created_at or started
    return (
        f'<AuthorizationRule i:type="{RULE_TYPE}"><ClaimType>{CLAIM_TYPE}</ClaimType>'
        f"<ClaimValue>{CLAIM_VALUE}</ClaimValue><Rights>{rights}</Rights>"
        f"<CreatedTime>{_stamp(created)}</CreatedTime><ModifiedTime>{_stamp(p.modified_at or created)}</ModifiedTime>"
        f"<KeyName>{escape(p.name)}</KeyName><PrimaryKey>{escape(p.primary_key)}</PrimaryKey>"
        f"<SecondaryKey>{escape(p.secondary_key)}</SecondaryKey></AuthorizationRule>"
    )


def _stamp(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
