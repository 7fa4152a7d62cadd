/*
 * lite_agent_jupyter's front-end part, for JupyterLab and Notebook 7: three plugins, written
 * by hand (no build step, no dependency). It is a prebuilt ("federated") extension: the page
 * calls `init` with its shared modules, asks the container below for "./extension" and
 * registers the plugins it gets.
 *
 * Why it exists: Notebook 7 runs keyboard shortcuts before the page's widgets see a key
 * (JupyterLab lets widgets go first), and in command mode it binds ArrowLeft / ArrowRight to
 * the heading commands, so the checkpoint slider's handle never got its arrow keys. Lumino
 * skips every shortcut for a key whose target carries `data-lm-suppress-shortcuts`; the plugin
 * puts that attribute on our slider's handle when it takes the focus, and on nothing else.
 * See docs/widgets.md, "Notebook 7".
 *
 * A second plugin shows a dead widget of ours as inactive (docs/widgets.md, "Saved notebooks").
 * A widget's kernel can be gone: the notebook was reopened, or its kernel restarted. Drawn
 * from widget state saved in the notebook, or left from before a restart, ipywidgets marks
 * each view `jupyter-widgets-disconnected` and its stylesheet puts a broken-link icon on every
 * one (a dozen over the slider); its buttons then do nothing, silently. With no state at all
 * it writes "Error displaying widget: model not found". For a widget of ours (the outermost
 * view has the class `lite-agent-widget`; its output's metadata `lite_agent_jupyter` names
 * the command that draws it again) the plugin hides the icons, puts a note above it ("Inactive
 * copy ... run %agent checkpoints"), replaces the error by that note, and answers a click,
 * drag or key on a dead control with why nothing happened. Other widgets are left alone.
 *
 * notebook-channel. The kernel's notebook tools (read_notebook, edit_cell, ...) act on the
 * notebook as this page holds it, never on the file: the plugin registers the comm target
 * TARGET on the kernel connection of every notebook panel; the kernel opens a comm and sends
 * requests ({op, id, client, ...}); the plugin applies them to the panel's shared model (so an
 * edit shows at once, is undone with Ctrl-Z and marks the document dirty) and answers
 * {id, ok, result | error} on the same comm. Several panels may hear one kernel (two views of
 * a notebook): each answers "hello" with a client id of its own, the kernel picks one and
 * names it in every request, the others ignore it. The INotebookTracker token comes from the
 * page's shared `@jupyterlab/notebook` module (a plugin is matched to a service by the token
 * object itself). See docs/notebook.md.
 */
(function () {
  'use strict';
  var NAME = 'lite-agent-jupyter';
  var HANDLE = '.lite-agent-checkpoints .noUi-handle';
  var TARGET = 'lite_agent_jupyter.notebook';
  var SUMMARY_CHARS = 200;
  var shared = null; // the page's share scope, given to init()

  var sliderKeys = {
    id: NAME + ':slider-keys',
    description: 'Gives the checkpoint slider its arrow keys in Notebook 7.',
    autoStart: true,
    activate: function () {
      document.addEventListener(
        'focusin',
        function (event) {
          var target = event.target;
          if (target instanceof Element && target.matches(HANDLE)) {
            target.setAttribute('data-lm-suppress-shortcuts', 'true');
          }
        },
        true
      );
    }
  };

  var ROOT = '.lite-agent-widget';
  var DEAD = 'jupyter-widgets-disconnected';
  var NOTE = 'lite-agent-inactive';
  var DONE = 'lite-agent-dead-output';
  var REBUILD = /^%agent [a-z]+( [0-9]+)?$/;
  var CONTROLS = 'button, select, option, input, textarea, label, .noUi-target';
  var KEYS = ['Enter', ' ', 'ArrowLeft', 'ArrowRight', 'ArrowUp', 'ArrowDown', 'Home', 'End',
    'PageUp', 'PageDown'];
  var STYLE = [
    ROOT + '.' + DEAD + '::before, ' + ROOT + ' .' + DEAD + '::before {',
    '  content: none !important; display: none !important; }',
    ROOT + '.' + DEAD + ' { opacity: 0.75; filter: grayscale(1); }',
    ROOT + '.' + DEAD + ' :is(' + CONTROLS + ') { cursor: not-allowed !important; }',
    '.' + NOTE + ' { margin: 2px 0 6px; padding: 4px 8px;',
    '  border-left: 3px solid var(--jp-warn-color1, #f0ad4e);',
    '  background: var(--jp-warn-color3, #fff3cd); color: var(--jp-ui-font-color1, #222);',
    '  font-size: var(--jp-ui-font-size1, 13px); }',
    '.' + NOTE + ' .lite-agent-inactive-why:not(:empty) { display: block; font-weight: bold; }'
  ].join('\n');

  // The output model holding `node` (a cell's output), found through the notebooks of the
  // page; its metadata says which widget of ours it is. null: not an output of a notebook.
  function outputModel(app, node) {
    try {
      for (var panel of app.shell.widgets('main')) {
        var cells = panel.content && panel.content.widgets;
        if (!cells || !panel.node.contains(node)) continue;
        for (var i = 0; i < cells.length; i++) {
          var area = cells[i].outputArea;
          if (!area || !cells[i].node.contains(node)) continue;
          for (var j = 0; j < area.widgets.length; j++) {
            if (area.widgets[j].node.contains(node)) return area.model.get(j);
          }
        }
      }
    } catch (error) {
      console.warn('lite-agent-jupyter: cannot read an output', error);
    }
    return null;
  }

  // What our metadata says of the widget at `node`; null when the output is not ours.
  function widgetInfo(app, node) {
    var model = outputModel(app, node);
    var meta = model && model.metadata && model.metadata.lite_agent_jupyter;
    return meta && typeof meta === 'object' ? meta : null;
  }

  function noteText(info, drawn) {
    var gone = 'its kernel is gone (the notebook was reopened, or its kernel restarted)';
    if (info.widget === 'approval') {
      return 'Inactive: these buttons belonged to a turn that has ended; ' + gone +
        '. Nothing is waiting for an answer.';
    }
    if (info.widget === 'plan') {
      return 'Inactive copy, saved with the notebook: ' + gone + ', so its controls do ' +
        'nothing. Run %agent go in a cell to run the plan printed below.';
    }
    var rebuild = typeof info.rebuild === 'string' && REBUILD.test(info.rebuild)
      ? info.rebuild : 'the %agent command that made it';
    return (drawn ? 'Inactive copy, saved with the notebook: ' : 'This widget cannot be drawn: ') +
      gone + ', so ' + (drawn ? 'its controls do nothing' : 'its live parts are lost') +
      '. Run ' + rebuild + ' in a cell to use it again; the printed summary below is the record.';
  }

  function makeNote(info, drawn) {
    var note = document.createElement('div');
    note.className = NOTE;
    note.setAttribute('role', 'note');
    var why = document.createElement('span');
    why.className = 'lite-agent-inactive-why';
    var text = document.createElement('span');
    text.className = 'lite-agent-inactive-text';
    text.textContent = noteText(info, drawn);
    note.appendChild(why);
    note.appendChild(text);
    return note;
  }

  function noteOf(root) {
    var before = root.previousElementSibling;
    return before && before.classList.contains(NOTE) ? before : null;
  }

  function scan(app) {
    document.querySelectorAll(ROOT + '.' + DEAD).forEach(function (root) {
      if (noteOf(root) || !root.parentNode) return;
      root.parentNode.insertBefore(makeNote(widgetInfo(app, root) || {}, true), root);
    });
    document.querySelectorAll('.jupyter-widgets:not(.' + DONE + ')').forEach(function (node) {
      if (node.children.length || node.textContent.indexOf('Error displaying widget') !== 0) {
        return;
      }
      var info = widgetInfo(app, node);
      if (!info) return; // not ours
      node.classList.add(DONE);
      node.textContent = '';
      node.appendChild(makeNote(info, false));
    });
  }

  // A click, drag or key on a control of a dead widget of ours: nothing would happen (no
  // kernel to send it to), so say why instead, in its note.
  function answerDeadAction(app, event) {
    var target = event.target;
    if (!(target instanceof Element) || !target.closest(CONTROLS)) return;
    var root = target.closest(ROOT);
    if (!root || !root.classList.contains(DEAD)) return;
    if (event.type === 'keydown' && KEYS.indexOf(event.key) < 0) return;
    event.preventDefault();
    event.stopPropagation();
    if (event.type === 'pointerdown') return; // the click that follows says it
    var note = noteOf(root);
    if (!note) {
      scan(app);
      note = noteOf(root);
    }
    if (!note) return;
    var what = target.closest('button') ? '"' + target.closest('button').textContent.trim() +
      '" did nothing' : 'Nothing changed';
    note.querySelector('.lite-agent-inactive-why').textContent =
      what + ': this copy has no kernel behind it.';
  }

  var inactiveWidgets = {
    id: NAME + ':inactive-widgets',
    description: 'Shows a saved or dead lite_agent_jupyter widget as inactive, and says why.',
    autoStart: true,
    activate: function (app) {
      var style = document.createElement('style');
      style.id = NAME + '-inactive-widgets';
      style.textContent = STYLE;
      document.head.appendChild(style);
      var pending = false;
      function later() {
        if (pending) return;
        pending = true;
        setTimeout(function () {
          pending = false;
          scan(app);
        }, 50);
      }
      new MutationObserver(later).observe(document.body, {
        subtree: true,
        childList: true,
        characterData: true,
        attributes: true,
        attributeFilter: ['class']
      });
      ['pointerdown', 'mousedown', 'click', 'keydown'].forEach(function (type) {
        document.addEventListener(type, function (event) {
          answerDeadAction(app, event);
        }, true);
      });
      later();
    }
  };

  function newId() {
    return Math.random().toString(36).slice(2) + Date.now().toString(36);
  }

  function outputText(output) {
    var type = output.output_type;
    if (type === 'stream') {
      var text = output.text;
      return Array.isArray(text) ? text.join('') : String(text || '');
    }
    if (type === 'error') {
      return output.ename + ': ' + output.evalue;
    }
    var data = output.data || {};
    if (data['text/plain'] !== undefined) {
      var plain = data['text/plain'];
      return Array.isArray(plain) ? plain.join('') : String(plain);
    }
    return '[' + Object.keys(data).join(', ') + ']';
  }

  /** A short summary of a cell's outputs: what the model reads, never the whole output. */
  function summary(cell) {
    if (cell.cell_type !== 'code') {
      return '';
    }
    var outputs = cell.outputs || [];
    var text = outputs.map(outputText).join('\n');
    if (text.length > SUMMARY_CHARS) {
      text = text.slice(0, SUMMARY_CHARS) + '… (' + text.length + ' chars)';
    }
    return text;
  }

  function describe(cell, index) {
    return {
      index: index,
      id: cell.id,
      type: cell.cell_type,
      source: cell.getSource(),
      execution_count: cell.cell_type === 'code' ? cell.execution_count : null,
      outputs: summary(cell)
    };
  }

  /** The cell a request names: a 0-based index (number) or a cell id (string). */
  function find(notebook, ref) {
    var cells = notebook.cells;
    if (typeof ref === 'number') {
      if (ref < 0 || ref >= cells.length || Math.floor(ref) !== ref) {
        throw new Error('no cell ' + ref + ' (the notebook has ' + cells.length + ' cells)');
      }
      return ref;
    }
    for (var i = 0; i < cells.length; i++) {
      if (cells[i].id === ref) {
        return i;
      }
    }
    throw new Error('no cell with id ' + JSON.stringify(ref));
  }

  /** Fails when the cell is not as the kernel last saw it (the person edited it since). */
  function check(cell, expect) {
    if (expect !== undefined && expect !== null && cell.getSource() !== expect) {
      throw new Error('changed');
    }
  }

  /** The index of the cell with id ``id``, or -1. */
  function indexOf(notebook, id) {
    var cells = notebook.cells;
    for (var i = 0; i < cells.length; i++) {
      if (cells[i].id === id) {
        return i;
      }
    }
    return -1;
  }

  /**
   * A rewind (the kernel's notebook_rewind.py): first every cell must still be as the kernel
   * planned it (``expect``: id -> its source, or null for absent), else nothing changes;
   * then the steps, in one transaction: ``set`` a cell's source, ``delete`` it, or
   * ``insert`` it back with its id after ``prev`` (null: at the top; missing: at ``index``).
   * Answers, per step, what it replaced, for the kernel's undo record.
   */
  function rewind(notebook, request) {
    var expect = request.expect || {};
    var changed = [];
    Object.keys(expect).forEach(function (id) {
      var at = indexOf(notebook, id);
      var now = at < 0 ? null : notebook.cells[at].getSource();
      if (now !== expect[id]) {
        changed.push(id);
      }
    });
    if (changed.length) {
      throw new Error('changed: ' + changed.join(', '));
    }
    var done = [];
    notebook.transact(function () {
      (request.steps || []).forEach(function (step) {
        var at = indexOf(notebook, step.id);
        var cell = at < 0 ? null : notebook.cells[at];
        var did = { before: cell ? cell.getSource() : null, index: at, cell_type: cell ? cell.cell_type : null };
        if (step.do === 'delete') {
          if (cell) {
            did.prev = at > 0 ? notebook.cells[at - 1].id : null;
            notebook.deleteCell(at);
          }
        } else if (cell) {
          cell.setSource(step.source);
        } else {
          var place = Math.min(Math.max(step.index || 0, 0), notebook.cells.length);
          if (step.prev === null) {
            place = 0;
          } else if (typeof step.prev === 'string' && indexOf(notebook, step.prev) >= 0) {
            place = indexOf(notebook, step.prev) + 1;
          }
          var kind = step.cell_type === 'markdown' ? 'markdown' : 'code';
          var made = { id: step.id, cell_type: kind, source: step.source, metadata: {} };
          if (kind === 'code') {
            made.outputs = [];
            made.execution_count = null;
          }
          notebook.insertCell(place, made);
          did.index = place;
        }
        done.push(did);
      });
    });
    return { steps: done };
  }

  function apply(panel, request) {
    var notebook = panel.content.model.sharedModel;
    var op = request.op;
    var i, cell;
    if (op === 'read') {
      var wanted = request.cells;
      var all = notebook.cells;
      var picked = [];
      if (Array.isArray(wanted)) {
        for (var w = 0; w < wanted.length; w++) {
          i = find(notebook, wanted[w]);
          picked.push(describe(all[i], i));
        }
      } else {
        for (i = 0; i < all.length; i++) {
          picked.push(describe(all[i], i));
        }
      }
      return { cells: picked, path: panel.context.path, dirty: panel.context.model.dirty };
    }
    if (op === 'get') {
      i = find(notebook, request.cell);
      return describe(notebook.cells[i], i);
    }
    if (op === 'edit') {
      i = find(notebook, request.cell);
      cell = notebook.cells[i];
      check(cell, request.expect);
      var before = cell.getSource();
      cell.setSource(request.source);
      return { index: i, id: cell.id, before: before };
    }
    if (op === 'insert') {
      var at = request.after === null || request.after === undefined ? 0 : find(notebook, request.after) + 1;
      var kind = request.cell_type === 'markdown' ? 'markdown' : 'code';
      // the new cell's id is the document's to choose (request.id is the request's own)
      var made = { cell_type: kind, source: request.source, metadata: {} };
      if (kind === 'code') {
        made.outputs = [];
        made.execution_count = null;
      }
      cell = notebook.insertCell(at, made);
      return { index: at, id: cell.id };
    }
    if (op === 'delete') {
      i = find(notebook, request.cell);
      cell = notebook.cells[i];
      check(cell, request.expect);
      var gone = describe(cell, i);
      gone.prev = i > 0 ? notebook.cells[i - 1].id : null;
      notebook.deleteCell(i);
      return gone;
    }
    if (op === 'rewind') {
      return rewind(notebook, request);
    }
    if (op === 'outputs') {
      i = find(notebook, request.cell);
      cell = notebook.cells[i];
      if (cell.cell_type !== 'code') {
        throw new Error('cell ' + i + ' is not a code cell');
      }
      notebook.transact(function () {
        cell.setOutputs(request.outputs || []);
        cell.execution_count = request.execution_count === undefined ? null : request.execution_count;
      });
      return { index: i, id: cell.id };
    }
    throw new Error('unknown request ' + JSON.stringify(op));
  }

  function listen(panel, client) {
    return function (comm) {
      comm.onMsg = function (msg) {
        var request = msg.content.data || {};
        if (request.op === 'hello') {
          comm.send({ op: 'hello', client: client, path: panel.context.path });
          return;
        }
        if (request.client !== client) {
          return; // another view of this kernel answers
        }
        var reply;
        try {
          reply = { id: request.id, ok: true, result: apply(panel, request) };
        } catch (error) {
          reply = { id: request.id, ok: false, error: String((error && error.message) || error) };
        }
        comm.send(reply);
      };
      comm.send({ op: 'hello', client: client, path: panel.context.path });
    };
  }

  function connect(panel) {
    var client = newId();
    var hooked = null;
    function hook() {
      var session = panel.sessionContext.session;
      var kernel = session ? session.kernel : null;
      if (kernel && kernel !== hooked) {
        hooked = kernel;
        kernel.registerCommTarget(TARGET, listen(panel, client));
      }
    }
    panel.sessionContext.kernelChanged.connect(hook);
    panel.sessionContext.ready.then(hook, function () {});
    hook();
  }

  function channelPlugin(tracker) {
    return {
      id: NAME + ':notebook-channel',
      description: "Lets the kernel's agent read and edit the notebook as this page holds it.",
      autoStart: true,
      requires: [tracker],
      activate: function (app, notebooks) {
        notebooks.forEach(connect);
        notebooks.widgetAdded.connect(function (_, panel) {
          connect(panel);
        });
      }
    };
  }

  /** The page's own `@jupyterlab/notebook` (its tokens are the page's objects). */
  function notebookModule() {
    var versions = shared && shared['@jupyterlab/notebook'];
    if (!versions) {
      return Promise.resolve(null);
    }
    var keys = Object.keys(versions);
    var best = keys.filter(function (k) {
      return versions[k].loaded;
    })[0] || keys[0];
    return Promise.resolve(versions[best].get()).then(function (factory) {
      return factory();
    });
  }

  var containers = (window._JUPYTERLAB = window._JUPYTERLAB || {});
  containers[NAME] = {
    init: function (scope) {
      shared = scope || null;
      return Promise.resolve();
    },
    get: function (module) {
      if (module !== './extension') {
        return Promise.reject(new Error(NAME + ' has no module ' + module));
      }
      var plugins = [sliderKeys, inactiveWidgets];
      // Both front ends read the plugins from `default` only when `__esModule` is set, as
      // webpack marks a compiled ES module.
      function exported() {
        return { __esModule: true, default: plugins };
      }
      return notebookModule().then(
        function (notebook) {
          if (notebook && notebook.INotebookTracker) {
            plugins.push(channelPlugin(notebook.INotebookTracker));
          } else {
            console.warn(NAME + ': no @jupyterlab/notebook shared: no notebook channel');
          }
          return exported;
        },
        function (error) {
          console.warn(NAME + ': no notebook channel: ' + error);
          return exported;
        }
      );
    }
  };
})();
