"""sbnotebook: Azure Service Bus in notebooks, with an embedded emulator."""

__version__ = "0.1.0"
