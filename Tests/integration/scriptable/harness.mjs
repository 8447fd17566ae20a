// Runs a Scriptable script (examples/widget.js) under Node with the parts of
// Scriptable's API it uses: Request over fetch, and a ListWidget, Color,
// Font, DrawContext, Size and Rect that record what the widget shows.
// Prints one JSON line: the requests made and what the widget holds.
// Usage: node harness.mjs SCRIPT "BASE TOKEN"
import { readFile } from "node:fs/promises";

const record = { requests: [], texts: [], images: 0, bars: 0, presented: false, completed: false };

globalThis.args = { widgetParameter: process.argv[3] || null };
globalThis.config = { runsInWidget: true };
globalThis.Request = class {
  constructor(url) { this.url = url; this.headers = {}; this.method = "GET"; }
  async loadJSON() {
    record.requests.push({ url: this.url, method: this.method, headers: this.headers });
    const response = await fetch(this.url, { method: this.method, headers: this.headers });
    return response.json();
  }
};
globalThis.Color = class {
  constructor(hex, alpha) { this.hex = hex; this.alpha = alpha; }
  static white() { return new Color("#ffffff"); }
  static lightGray() { return new Color("#aaaaaa"); }
};
globalThis.Font = { boldSystemFont: (size) => ({ bold: true, size }), systemFont: (size) => ({ size }) };
globalThis.Size = class { constructor(w, h) { this.width = w; this.height = h; } };
globalThis.Rect = class { constructor(x, y, w, h) { Object.assign(this, { x, y, w, h }); } };
globalThis.DrawContext = class {
  setFillColor() {}
  fillRect() { record.bars += 1; }
  getImage() { return { image: true }; }
};
globalThis.ListWidget = class {
  addText(text) { const item = { text }; record.texts.push(item); return item; }
  addImage() { record.images += 1; return {}; }
  addSpacer() {}
  async presentSmall() { record.presented = true; }
};
globalThis.Script = { setWidget: () => { record.presented = true; }, complete: () => { record.completed = true; } };

const source = await readFile(process.argv[2], "utf8");
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
await new AsyncFunction(source)();
console.log(JSON.stringify({ ...record, texts: record.texts.map((t) => t.text) }));
