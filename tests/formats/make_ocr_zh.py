"""Writes ``tests/formats/ocr/zh_scan.png``: two lines of Simplified Chinese (a port report's
sentences, the text in :data:`LINES`) drawn in WenQuanYi Micro Hei at 48 px, 1-bit, as a
300 dpi scan would hold them. Committed, because CI has Tesseract's chi_sim data but no CJK
font to draw it with; rerun after ``apt-get install fonts-wqy-microhei``:

    python tests/formats/make_ocr_zh.py
"""

from __future__ import annotations

from pathlib import Path

LINES = ("港口起重机的订单已在五月签署。", "鹿特丹今年的仓储能力翻了一番。")
FONT = "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"
OUT = Path(__file__).parent / "ocr" / "zh_scan.png"


def main() -> None:
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(FONT, 48)
    image = Image.new("L", (900, 260), 255)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(LINES):
        draw.text((40, 50 + i * 100), line, font=font, fill=0)
    image.convert("1").save(OUT, optimize=True)


if __name__ == "__main__":
    main()
