"""Descriptions of schema properties whose models this package leaves alone."""

# Descriptions of properties of models kept in modules this one leaves alone (the pass PATCH
# body and Variant A's models, which move with their routes), applied where a property has none.
PROPERTIES: dict[str, dict[str, str]] = {
    "PassUpdate": {
        "field_values": "Values merged into the pass's field values, by field key; a key "
        "sent as `null` restores the template's default.",
        "metadata": "Merged into the pass's metadata; a key sent as `null` is removed.",
        "holder_name": "The holder's corrected name.",
        "holder_email": "The holder's corrected email address.",
    },
    "PassObject": {
        "google_save_url": "The pass's Google Wallet save link, through Tessera's redirect "
        "(which records the add intent); null without one.",
    },
    "CreatePassRequest": {
        "templateId": "The template to issue the pass from (`tmpl_...`).",
        "data": "Values by template field key (strings, numbers, booleans or null for the "
        "default), and optionally `holderName`, `holderEmail` and `metadata`.",
    },
    "CreatePassResponse": {
        "apple": "The signed `.pkpass` download URL (the pass's `download_url`).",
        "google": "The Google Wallet save link; the pass's landing page when the pass has none.",
    },
    "ErrorMessage": {"message": "What went wrong, in a sentence."},
}
