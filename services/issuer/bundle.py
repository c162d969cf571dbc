"""The .pkpass zip, put together from a pass's own files and the assets of its template version.

Built by the issuer when it signs a pass, and again by `IssuerReads.pass_file` from what
`pass_files` and `template_assets` hold, with the same bytes both times: a fixed timestamp, the
files in .pkpass order (pass.json, images, strings files, manifest.json, signature). PNG files
are stored as they are: they are compressed already, and deflating them again would cost CPU on
every download for nothing. Everything else is deflated.
"""

import io
import zipfile
from collections.abc import Iterable

# A fixed timestamp keeps the zip bytes stable for identical content (only the signature's
# signing time varies between builds).
_ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)


def pkpass_zip(
    pass_json: bytes, assets: Iterable[tuple[str, bytes]], manifest: bytes, signature: bytes
) -> bytes:
    """The .pkpass: pass.json, the assets in their order, manifest.json and signature."""
    return zip_files(
        [("pass.json", pass_json), *assets, ("manifest.json", manifest), ("signature", signature)]
    )


def zip_files(files: Iterable[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=_ZIP_DATE_TIME)
            png = name.endswith(".png")
            info.compress_type = zipfile.ZIP_STORED if png else zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()
