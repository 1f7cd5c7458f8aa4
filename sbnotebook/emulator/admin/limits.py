"""What Service Bus (a Standard namespace, as the emulator reports itself) refuses in a description,
refused with a 400 in its words where they are known.

Words seen from Service Bus (azure-sdk-for-python's recorded tests): a lock over five minutes, a
changed RequiresSession, MaxMessageSizeInKilobytes on Standard, Express with duplicate detection.
The other messages follow their form; docs/emulator.md lists which are which. A value the entity
already holds is not judged again: the topology file (an emulator extension) may set values the
API refuses, such as a one-second lock for tests, and ``update_queue(get_queue(...))`` must pass.
"""

from __future__ import annotations

from ..errors import MORE
from ..topology import DEFAULT_MAX_MESSAGE_SIZE, EntityProperties

STANDARD_SIZES_MB = (1024, 2048, 3072, 4096, 5120)
MAX_USER_METADATA = 1024
STATUSES = {
    "Queue": ("Active", "Disabled", "SendDisabled", "ReceiveDisabled"),
    "Topic": ("Active", "Disabled", "SendDisabled"),
    "Subscription": ("Active", "Disabled", "ReceiveDisabled"),
}
_IMMUTABLE = (
    ("requires_session", "RequiresSession"),
    ("requires_duplicate_detection", "RequiresDuplicateDetection"),
    ("enable_partitioning", "EnablePartitioning"),
)


class BadDescription(ValueError):
    """A description Service Bus would refuse (400); the message is Service Bus's form."""


def refuse(text: str) -> BadDescription:
    return BadDescription(f"SubCode=40000. {text} {MORE}")


def timespan(seconds: float) -> str:
    """.NET's TimeSpan text, as Service Bus quotes a value: ``25.00:00:00``, ``00:00:01.5000000``."""
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    if seconds != whole:
        text += f".{round((seconds - whole) * 10**7):07d}"
    return f"{days}.{text}" if days else text


def _range(element: str, seconds: float, low: float, high: float, low_text: str, high_text: str) -> None:
    if seconds < low:
        raise refuse(
            f"The supplied {element} is below the allowed minimum of {low_text}. "
            f"Parameter name: {element} Actual value was {timespan(seconds)}."
        )
    if seconds > high:
        raise refuse(
            f"The supplied {element} exceeds the allowed maximum of {high_text}. "
            f"Parameter name: {element} Actual value was {timespan(seconds)}."
        )


def _lock(kind: str, seconds: float) -> None:
    if seconds > 300:  # Service Bus's words (a subscription's come without the SubCode)
        text = (
            f"The supplied lock time exceeds the allowed maximum of '5' minutes. {MORE} "
            f"Parameter name: LockDuration Actual value was {timespan(seconds)}."
        )
        raise BadDescription(text if kind == "Subscription" else f"SubCode=40000. {text}")
    _range("LockDuration", seconds, 5, 300, "'5' seconds", "'5' minutes")


def check_changes(kind: str, new: EntityProperties, current: EntityProperties | None) -> None:
    """Refuse what Service Bus refuses among the values that differ from what the entity holds
    (from the defaults, for a new entity)."""
    old = current if current is not None else EntityProperties()
    if current is not None:
        for attr, element in _IMMUTABLE:
            if getattr(new, attr) != getattr(current, attr):
                raise refuse(f"The value for the {element} property of an existing {kind} cannot be changed.")
    if new.enable_express and new.requires_duplicate_detection:
        raise refuse(
            "Both DelayedPersistence property and RequiresDuplicateDetection property cannot be enabled together."
        )
    if new.max_message_size != old.max_message_size and new.max_message_size != DEFAULT_MAX_MESSAGE_SIZE:
        raise BadDescription(
            f"SubCode=40000. Bad Request. {MORE} (MaxMessageSizeInKilobytes is set on Premium namespaces only; "
            "a Standard namespace, as this emulator is, takes 256.)"
        )
    changed = {attr for attr in vars(new) if getattr(new, attr) != getattr(old, attr)}
    if "lock_duration" in changed:
        _lock(kind, new.lock_duration)
    if "max_delivery_count" in changed and new.max_delivery_count < 1:
        raise refuse(
            "The supplied MaxDeliveryCount is below the allowed minimum of '1'. "
            f"Parameter name: MaxDeliveryCount Actual value was {new.max_delivery_count}."
        )
    if "default_message_ttl" in changed:
        _range("DefaultMessageTimeToLive", new.default_message_ttl, 1, float("inf"), "'1' second", "")
    if "duplicate_detection_window" in changed:
        window = new.duplicate_detection_window
        _range("DuplicateDetectionHistoryTimeWindow", window, 20, 7 * 86400, "'20' seconds", "'7' days")
    if "auto_delete_on_idle" in changed:
        _range("AutoDeleteOnIdle", new.auto_delete_on_idle, 300, float("inf"), "'5' minutes", "")
    _check_values(kind, new, changed)


def _check_values(kind: str, new: EntityProperties, changed: set[str]) -> None:
    if "max_size_in_megabytes" in changed and new.max_size_in_megabytes not in STANDARD_SIZES_MB:
        sizes = ", ".join(str(s) for s in STANDARD_SIZES_MB)
        raise refuse(
            f"The supplied MaxSizeInMegabytes is not valid for a Standard namespace (it takes {sizes}). "
            f"Actual value was {new.max_size_in_megabytes}."
        )
    if new.user_metadata is not None and len(new.user_metadata) > MAX_USER_METADATA:
        raise refuse(
            f"The supplied UserMetadata exceeds the allowed maximum of '{MAX_USER_METADATA}' characters. "
            f"Actual length was {len(new.user_metadata)}."
        )
    if new.status not in STATUSES[kind]:
        raise refuse(f"The supplied Status '{new.status}' is not valid for a {kind}: {', '.join(STATUSES[kind])}.")
