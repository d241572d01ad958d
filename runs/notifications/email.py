"""Email: the notice as a plain-text message through Django's configured mail backend."""

from __future__ import annotations

import smtplib

from django.conf import settings
from django.core.mail import send_mail

from runs.notifications.base import Channel, DeliveryError, Notice


class EmailChannel(Channel):
    def send(self, notice: Notice) -> None:
        if not self.recipients:
            raise DeliveryError("this email channel has no recipients", permanent=True)
        try:
            send_mail(notice.subject, notice.text, settings.DEFAULT_FROM_EMAIL, self.recipients, fail_silently=False)
        except smtplib.SMTPRecipientsRefused as exc:
            raise DeliveryError(f"the mail server refused the recipients ({len(exc.recipients)})", permanent=True) from None
        except (smtplib.SMTPException, OSError) as exc:
            raise DeliveryError(f"sending mail failed: {type(exc).__name__}: {exc}") from None
