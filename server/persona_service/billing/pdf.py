"""Invoice PDFs (fpdf2): number, dates, organization, line items, totals, status."""

from __future__ import annotations

from datetime import datetime

from persona_service.billing.records import InvoiceRecord


def money(amount_minor: int, currency: str) -> str:
    sign = "-" if amount_minor < 0 else ""
    units, cents = divmod(abs(amount_minor), 100)
    return f"{sign}{units:,}.{cents:02d} {currency.upper()}"


def _day(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d") if value is not None else "-"


def render_invoice(invoice: InvoiceRecord, org_name: str) -> bytes:
    from fpdf import FPDF  # here, not at import: fpdf and fontTools cost every process start (docs/testing.md)

    pdf = FPDF(format="A4")
    pdf.set_creation_date(invoice.created_at)  # the same invoice version renders the same bytes
    pdf.set_title(f"Invoice {invoice.number}")
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 20)
    pdf.cell(0, 12, f"Invoice {invoice.number}", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 11)
    for label, value in (
        ("Organization", org_name),
        ("Invoice id", invoice.id),
        ("Processor id", invoice.processor_invoice_id),
        ("Status", invoice.status.upper()),
        ("Period", f"{_day(invoice.period_start)} to {_day(invoice.period_end)}"),
        ("Due date", _day(invoice.due_date)),
        ("Paid at", _day(invoice.paid_at)),
    ):
        pdf.cell(40, 7, f"{label}:")
        pdf.cell(0, 7, value, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(6)
    pdf.set_font("Helvetica", "B", 11)
    widths = (95, 20, 35, 35)
    for width, title in zip(widths, ("Description", "Qty", "Unit", "Amount")):
        pdf.cell(width, 8, title, border="B")
    pdf.ln()
    pdf.set_font("Helvetica", "", 11)
    for line in invoice.line_items:
        cells = (line.description, str(line.quantity), money(line.unit_amount_minor, invoice.currency),
                 money(line.amount_minor, invoice.currency))
        for width, text in zip(widths, cells):
            pdf.cell(width, 8, text)
        pdf.ln()
    pdf.ln(4)
    pdf.set_font("Helvetica", "B", 11)
    for label, amount in (("Amount due", invoice.amount_due_minor), ("Amount paid", invoice.amount_paid_minor)):
        pdf.cell(150, 8, label, align="R")
        pdf.cell(35, 8, money(amount, invoice.currency), new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())
