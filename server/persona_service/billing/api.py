"""What other modules may use of `billing` (its public surface): charges
through the service and the payment processor port. Everything else in this
folder is private to it."""

from persona_service.billing.processor import processor_for
from persona_service.billing.service import BillingService

__all__ = ["BillingService", "processor_for"]
