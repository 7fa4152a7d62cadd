/*
 * lite_agent_jupyter's front-end part, for JupyterLab and Notebook 7: one plugin, written by
 * hand (no build step, no dependency). It is a prebuilt ("federated") extension: the page loads
 * this script, then asks the container below for "./extension" and registers its plugin.
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
 */
(function () {
  'use strict';
  var NAME = 'lite-agent-jupyter';
  var HANDLE = '.lite-agent-checkpoints .noUi-handle';

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

  var containers = (window._JUPYTERLAB = window._JUPYTERLAB || {});
  containers[NAME] = {
    init: function () {
      return Promise.resolve();
    },
    get: function (module) {
      if (module !== './extension') {
        return Promise.reject(new Error(NAME + ' has no module ' + module));
      }
      // Both front ends read the plugins from `default` only when `__esModule` is set, as
      // webpack marks a compiled ES module.
      return Promise.resolve(function () {
        return { __esModule: true, default: [sliderKeys, inactiveWidgets] };
      });
    }
  };
})();
