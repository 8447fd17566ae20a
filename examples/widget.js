// Coffee Tracker for Scriptable (iOS and iPadOS): a home-screen widget with
// caffeine in the body now, its level, cups today, and the next six hours.
//
// 1. On the service's host: coffee-tracker token widget --roles read
// 2. In Scriptable: a new script, this file pasted in; set BASE and TOKEN
//    (or give "BASE TOKEN" as the widget's Parameter).
// 3. On the home screen: a Scriptable widget, with this script.
//
// It reads GET /api/v1/model (docs/protocol.md §12) and nothing else.

const BASE = "https://coffee.example.org";
const TOKEN = "ct_paste-your-token-here";
const HOURS = 6;
const COLORS = { green: "#34c759", yellow: "#ffcc00", red: "#ff3b30" };

function settings() {
  const given = (args.widgetParameter || "").trim().split(/\s+/);
  return given.length === 2 ? { base: given[0], token: given[1] } : { base: BASE, token: TOKEN };
}

async function loadModel(base, token) {
  const request = new Request(`${base.replace(/\/$/, "")}/api/v1/model`);
  request.headers = { Authorization: `Bearer ${token}` };
  const model = await request.loadJSON();
  if (!model.ok) throw new Error(model.error ? `${model.error.code}: ${model.error.message}` : "no model");
  return model;
}

// The model's timeline points from now to HOURS ahead.
function nextHours(model, hours) {
  const now = Date.parse(model.at);
  return model.timeline.filter((point) => {
    const t = Date.parse(point.date);
    return t >= now && t <= now + hours * 3600 * 1000;
  });
}

function curve(points, width, height) {
  const context = new DrawContext();
  context.size = new Size(width, height);
  context.opaque = false;
  context.respectScreenScale = true;
  const top = Math.max(1, ...points.map((p) => p.mgCaffeine));
  const step = points.length > 1 ? width / (points.length - 1) : width;
  context.setFillColor(new Color(COLORS.green, 0.8));
  points.forEach((point, i) => {
    const h = Math.max(1, (point.mgCaffeine / top) * height);
    context.fillRect(new Rect(i * step, height - h, Math.max(1, step - 1), h));
  });
  return context.getImage();
}

async function makeWidget(model) {
  const widget = new ListWidget();
  widget.backgroundColor = new Color("#1c1c1e");
  const title = widget.addText("Caffeine");
  title.font = Font.boldSystemFont(12);
  title.textColor = Color.lightGray();
  const mg = widget.addText(`${Math.round(model.mgCaffeine)} mg`);
  mg.font = Font.boldSystemFont(28);
  mg.textColor = new Color(COLORS[model.level] || "#ffffff");
  const cups = widget.addText(`${model.level} · ${model.cupsToday.toFixed(1)} cups today`);
  cups.font = Font.systemFont(11);
  cups.textColor = Color.white();
  const points = nextHours(model, HOURS);
  if (points.length > 0) {
    widget.addSpacer(4);
    widget.addImage(curve(points, 140, 36));
    const last = points[points.length - 1];
    const later = widget.addText(`${Math.round(last.mgCaffeine)} mg in ${HOURS} h`);
    later.font = Font.systemFont(10);
    later.textColor = Color.lightGray();
  }
  widget.refreshAfterDate = new Date(Date.now() + 15 * 60 * 1000);
  return widget;
}

const { base, token } = settings();
const widget = await makeWidget(await loadModel(base, token));
if (config.runsInWidget) {
  Script.setWidget(widget);
} else {
  await widget.presentSmall();
}
Script.complete();
