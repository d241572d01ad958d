"""Alert delivery: each new alert of a report goes once to every enabled channel that wants its
severity, each delivery recorded (``runs.models.Delivery``) with its outcome and retried with a
doubling backoff until it arrives or ``NOTIFY_MAX_ATTEMPTS`` is spent.

* The finaliser calls :func:`deliver_report_alerts` right after the report is written (one row per
  (alert, channel), created with the unique constraint deciding, then sent at once).
* The every-minute ``evalhub-deliver-notifications`` task (``runs/periodic.py``) calls
  :func:`deliver_due` for retries and for rows whose sender died.
* A sender claims a row with one conditional update (``claimed_until``); only the process whose
  update changed it sends, so two workers never send the same delivery twice.
* Messages are redacted with the channel's URL as an exact value before they are stored or logged.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from evalhub.conf import evalhub_setting
from evalhub.fields import storable_text
from evalhub.secrets import redact
from runs.models import Alert, Delivery, DeliveryStatus, NotificationChannel, Report
from runs.notifications import DeliveryError, Notice, channel_class

logger = logging.getLogger(__name__)

#: How long a sender holds a claimed delivery (longer than a webhook's timeout).
CLAIM_SECONDS = 60
NOTICE_SCHEMA = "evalhub.alert.v1"


def _run_url(run_id: int) -> str:
    """The run page's address: absolute under ``EVALHUB_PUBLIC_URL`` when set, else the path."""
    path = reverse("pages:run", args=[run_id])
    base = str(evalhub_setting("PUBLIC_URL") or "").rstrip("/")
    return f"{base}{path}" if base else path


def alert_notice(alert: Alert) -> Notice:
    """The notice for one stored alert (its report and run must be loadable)."""
    report = alert.report
    run = report.run
    url = _run_url(run.pk)
    where = " · ".join(part for part in (alert.case_key, alert.candidate_key) if part) or "run-wide"
    repeats = f" (×{alert.occurrences})" if alert.occurrences > 1 else ""
    subject = f"[evalhub] {alert.severity}: {alert.code} — {where}"
    text = f"{alert.message}{repeats}\nRun {run.pk} ({run.lane}, night {run.schedule.night}): {url}\n"
    document = {
        "schema": NOTICE_SCHEMA,
        "test": False,
        "alert": {
            "id": alert.pk,
            "code": alert.code,
            "severity": alert.severity,
            "caseId": alert.case_key or None,
            "candidateId": alert.candidate_key or None,
            "message": alert.message,
            "occurrences": alert.occurrences,
        },
        "run": {"id": run.pk, "lane": run.lane, "night": str(run.schedule.night), "url": url},
        "report": {"id": report.pk, "bundleId": report.bundle_id, "generatedAt": report.generated_at},
    }
    return Notice(subject=subject, text=text, document=document)


def test_notice(channel: NotificationChannel) -> Notice:
    """The notice a channel's "send a test" sends: marked as a test, naming the channel."""
    subject = f"[evalhub] test notification for {channel.name}"
    text = f"This is a test from evalhub: alerts will reach this channel ({channel.get_kind_display()}).\n"
    return Notice(subject=subject, text=text, document={"schema": NOTICE_SCHEMA, "test": True, "channel": channel.name})


def deliver_report_alerts(report: Report, *, environ: Mapping[str, str] | None = None, now: dt.datetime | None = None) -> int:
    """Create the deliveries of ``report``'s alerts (one per alert and enabled channel wanting its
    severity; existing ones are left alone) and send those due. Returns how many were sent now.
    Never raises for a channel's failure: it is recorded on the delivery."""
    now = now or timezone.now()
    channels = list(NotificationChannel.objects.filter(enabled=True))
    if not channels:  # nothing to deliver to: the report's alerts need not be read
        return 0
    alerts = list(report.alerts.order_by("id"))  # the report's order: critical safety failures first
    rows = [
        Delivery(channel=channel, alert=alert, next_attempt_at=now)
        for alert in alerts
        for channel in channels
        if channel.wants(alert.severity)
    ]
    if not rows:
        return 0
    Delivery.objects.bulk_create(rows, ignore_conflicts=True)
    return deliver_due(environ=environ, now=now, queryset=Delivery.objects.filter(alert__report=report))


def deliver_due(*, environ: Mapping[str, str] | None = None, now: dt.datetime | None = None, queryset: Any = None) -> int:
    """Send every pending delivery whose time has come and that no live sender holds; returns how
    many arrived."""
    now = now or timezone.now()
    due = (queryset if queryset is not None else Delivery.objects.all()).filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
    due = due.filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
    sent = 0
    for pk in due.order_by("next_attempt_at", "pk").values_list("pk", flat=True):
        sent += attempt_delivery(pk, environ=environ, now=now) == DeliveryStatus.SENT
    return sent


def _retry_delay(attempts: int) -> dt.timedelta:
    """The wait after the ``attempts``-th failure: NOTIFY_RETRY_SECONDS doubled each time."""
    return dt.timedelta(seconds=float(evalhub_setting("NOTIFY_RETRY_SECONDS")) * 2 ** max(attempts - 1, 0))


def attempt_delivery(delivery_pk: int, *, environ: Mapping[str, str] | None = None, now: dt.datetime | None = None) -> str | None:
    """Claim one delivery and send it once. Returns its new status, or None when another sender
    holds it or it is no longer due (nothing was sent)."""
    now = now or timezone.now()
    claimed = (
        Delivery.objects.filter(pk=delivery_pk, status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .update(claimed_until=now + dt.timedelta(seconds=CLAIM_SECONDS))
    )
    if claimed != 1:
        return None
    delivery = Delivery.objects.select_related("channel", "alert__report__run__schedule").get(pk=delivery_pk)
    channel = delivery.channel
    environ = environ if environ is not None else os.environ
    notice = alert_notice(delivery.alert) if delivery.alert is not None else test_notice(channel)
    attempts = delivery.attempts + 1
    error = _send(channel, notice, environ)
    finished = timezone.now()
    if error is None:
        Delivery.objects.filter(pk=delivery_pk).update(
            status=DeliveryStatus.SENT, attempts=attempts, sent_at=finished, claimed_until=None, last_error=""
        )
        return DeliveryStatus.SENT
    message, permanent = error
    # A webhook's answer is quoted in the message as it came (evalhub/fields.py storable_text).
    message = storable_text(message)
    last = permanent or attempts >= int(evalhub_setting("NOTIFY_MAX_ATTEMPTS"))
    logger.warning(
        "notification %s to channel %s failed (attempt %s%s): %s",
        delivery_pk,
        channel.name,
        attempts,
        ", giving up" if last else "",
        message,
    )
    Delivery.objects.filter(pk=delivery_pk).update(
        status=DeliveryStatus.FAILED if last else DeliveryStatus.PENDING,
        attempts=attempts,
        claimed_until=None,
        last_error=message,
        next_attempt_at=now if last else now + _retry_delay(attempts),
    )
    return DeliveryStatus.FAILED if last else DeliveryStatus.PENDING


def _send(channel: NotificationChannel, notice: Notice, environ: Mapping[str, str]) -> tuple[str, bool] | None:
    """None when ``notice`` arrived, else (redacted message, permanent)."""
    url = environ.get(channel.url_env, "") if channel.url_env else ""
    extra = [value for value in (url, settings.EMAIL_HOST_PASSWORD) if value]
    try:
        sender = channel_class(channel.kind)(
            name=channel.name, url_env=channel.url_env, recipients=channel.recipients or [], environ=environ
        )
        sender.send(notice)
    except DeliveryError as exc:
        return redact(exc.message, extra_values=extra)[:2000], exc.permanent
    except Exception as exc:  # a channel's bug must not stop the finaliser; recorded, retried
        return redact(f"{type(exc).__name__}: {exc}", extra_values=extra)[:2000], False
    return None


def send_test(channel: NotificationChannel, *, environ: Mapping[str, str] | None = None) -> Delivery:
    """Send ``channel`` a test notice now (whether or not it is enabled), recorded as a delivery
    without an alert; returns the delivery with its outcome. A failed test is not retried."""
    now = timezone.now()
    delivery = Delivery.objects.create(channel=channel, alert=None, next_attempt_at=now)
    attempt_delivery(delivery.pk, environ=environ, now=now)
    # A test is sent once: a retryable failure is still its final outcome.
    Delivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.PENDING).update(status=DeliveryStatus.FAILED)
    delivery.refresh_from_db()
    return delivery
