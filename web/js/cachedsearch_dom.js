// DOM helpers every CachedSearch panel shares: elements, a style sheet added once, text wrapped as the panel's font
// wraps it, and the panel's DOM widget sized to its content. Exports only: ComfyUI loads every script under web/
// as an extension, and this one registers nothing.

// Each side's inset of a panel's element in its node. Passed to addDOMWidget so that a panel's minimum height
// counts the margins the frontend lays the element out with.
export const PANEL_MARGIN = 10;

export function element(tag, text, className) {
  const made = document.createElement(tag);
  if (text !== undefined) made.textContent = text;
  if (className) made.className = className;
  return made;
}

// Adds the style sheet `css` to the page under `id`, once.
export function ensureStyle(id, css) {
  if (document.getElementById(id)) return;
  const style = document.createElement("style");
  style.id = id;
  style.textContent = css;
  document.head.append(style);
}

let measuring;

function textWidth(text, font) {
  measuring ??= document.createElement("canvas").getContext("2d");
  measuring.font = font;
  return measuring.measureText(text).width;
}

// Lines `text` wraps into at `width` px in `font` (`slack`: the share of the width a line may fill, room for the
// browser's rounding), so a panel's height is known before it is laid out.
export function wrappedLines(text, width, font, slack = 0.95) {
  const usable = slack * Math.max(60, width);
  const space = textWidth(" ", font);
  let lines = 1;
  let line = 0;
  for (const word of text.split(" ")) {
    const wordWidth = textWidth(word, font);
    if (line > 0 && line + space + wordWidth > usable) {
      lines += 1;
      line = wordWidth;
    } else {
      line += (line > 0 ? space : 0) + wordWidth;
    }
  }
  return lines;
}

// The node's panel element (a DOM widget named `name`, made on first use); `contentHeight(element, width)`: the
// height its content needs at `width`, the element's width inside the margins. The frontend gives a DOM widget at
// least its minimum height, and lays the element out that height less the margin on each side.
export function panelElement(node, name, className, contentHeight) {
  const found = node.widgets?.find((widget) => widget.name === name);
  if (found) return found.element;
  const panel = element("div", undefined, className);
  node.addDOMWidget(name, "cachedsearch", panel, {
    serialize: false,
    hideOnZoom: false,
    margin: PANEL_MARGIN,
    getMinHeight: () => contentHeight(panel, node.size[0] - 2 * PANEL_MARGIN) + 2 * PANEL_MARGIN,
  });
  return panel;
}

// Grows the node to what its widgets ask for (and, given its panel, wide enough for a table wider than the node).
export function fitNode(node, panel) {
  if (panel && panel.clientWidth > 0 && panel.scrollWidth > panel.clientWidth) {
    node.setSize([node.size[0] + panel.scrollWidth - panel.clientWidth + 2, node.size[1]]);
  }
  const needed = node.computeSize?.();
  if (needed && node.size[1] < needed[1]) node.setSize([node.size[0], needed[1]]);
  node.setDirtyCanvas?.(true, true);
}

// Calls `listener` whenever the artist changes `widget` (its callback), once per widget and listener.
export function onWidgetChange(widget, listener) {
  if (!widget || widget.cachedsearchListeners?.has(listener)) return;
  if (!widget.cachedsearchListeners) {
    const listeners = new Set();
    const callback = widget.callback;
    widget.callback = function () {
      const result = callback?.apply(this, arguments);
      for (const notify of listeners) notify();
      return result;
    };
    widget.cachedsearchListeners = listeners;
  }
  widget.cachedsearchListeners.add(listener);
}
