/* The reviewer's page (docs/api/review-page.md): a client of the REST API like any other.

   - Sign in: an API key (sent as x-api-key) or a bearer token (Authorization), kept in
     sessionStorage (this tab only), sent in a header, never in a URL, never logged. No cookie
     is read or sent (credentials: 'omit'), so a request from another site cannot act as the
     reviewer (no CSRF).
   - The queue: the caller's open review tasks of the project (a task whose
     metadata.extractionReview names a family: docs/api/extraction.md "Review"), and take-next
     (POST /api/tasks/take-next, docs/api/work.md).
   - A task: the family's data objects of the run and its open exceptions; the page images and
     words (GET /api/document-families/{id}/pages/{n}/image|words); each value's box
     (dataFeatures.bbox, points from the top-left) drawn in percent of the page's size in points.
   - A correction is PUT /api/data-objects/{id}/attributes/{attributeId}: {value, nodeIds?} or
     {confirmed: true}; the server closes exceptions, the task and the family (one review path).
   - Every value drawn goes through textContent or a DOM property, never parsed as markup.
*/
'use strict';

(function () {
  const CREDENTIAL = 'review.credential';   // sessionStorage: {kind: 'key'|'bearer', value}
  const PLACE = 'review.place';             // sessionStorage: {projectId, taskId}
  const DPI = 150;
  const MAX_PAGES = 30;                     // pages drawn of one document
  const MAX_OBJECT_PAGES = 10;              // 10 x 100 data objects read for one task

  const state = {
    me: null, projects: [], doneStatuses: new Set(), queue: [], task: null, family: null,
    objects: [], exceptions: [], definitions: new Map(), pageSizes: new Map(),
    editing: null, picked: new Map(), busy: false,
  };

  const $ = (id) => document.getElementById(id);

  /* An element with properties (never markup): el('td', {className: 'x', textContent: v}, child...). */
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === 'dataset') Object.assign(node.dataset, value);
      else if (key.startsWith('aria') || key === 'role' || key === 'for' || key === 'scope') node.setAttribute(
        key.startsWith('aria') ? 'aria-' + key.slice(4).toLowerCase() : key, String(value));
      else node[key] = value;
    }
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }

  function say(text, isError) {
    const box = $('status');
    box.textContent = text;
    box.classList.toggle('error', Boolean(isError));
    box.setAttribute('role', isError ? 'alert' : 'status');
  }

  // ------------------------------------------------------------------ the API

  function credential() {
    try { return JSON.parse(sessionStorage.getItem(CREDENTIAL) || 'null'); } catch (e) { return null; }
  }

  function place() {
    try { return JSON.parse(sessionStorage.getItem(PLACE) || '{}') || {}; } catch (e) { return {}; }
  }

  function remember(changes) {
    sessionStorage.setItem(PLACE, JSON.stringify(Object.assign(place(), changes)));
  }

  async function api(method, path, body) {
    const cred = credential();
    if (!cred) throw Object.assign(new Error('Not signed in'), {status: 401});
    const headers = {Accept: 'application/json'};
    if (cred.kind === 'bearer') headers.Authorization = 'Bearer ' + cred.value;
    else headers['x-api-key'] = cred.value;
    const init = {method, headers, credentials: 'omit', cache: 'no-store', referrerPolicy: 'no-referrer'};
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    // relative: the page works under any base path (an API Gateway stage too)
    const answer = await fetch('api/' + path, init);
    let data = null;
    if (answer.status !== 204) {
      const text = await answer.text();
      try { data = text ? JSON.parse(text) : null; } catch (e) { data = {message: text.slice(0, 300)}; }
    }
    if (!answer.ok) {
      const message = (data && data.message) || ('HTTP ' + answer.status);
      throw Object.assign(new Error(message), {status: answer.status, body: data});
    }
    return data;
  }

  const q = (value) => "'" + String(value).replace(/\\/g, '\\\\').replace(/'/g, "\\'") + "'";
  const enc = encodeURIComponent;

  /* Every item of a list, 100 a page, at most ``cap`` pages: ``out.cut`` says the cap was hit. */
  async function pages(path, cap) {
    const out = [];
    out.cut = false;
    for (let page = 0; page < cap; page++) {
      const sep = path.includes('?') ? '&' : '?';
      const answer = await api('GET', `${path}${sep}pageSize=100&page=${page}`);
      out.push(...(answer.content || []));
      if (answer.last === true || (page + 1) * 100 >= (answer.totalElements || 0)) return out;
    }
    out.cut = true;
    return out;
  }

  // ------------------------------------------------------------------ sign in and out

  async function signIn(event) {
    event.preventDefault();
    const secret = $('secret').value.trim();
    const kind = document.querySelector('input[name=kind]:checked').value;
    if (!secret) { say('Enter your API key or token.', true); return; }
    sessionStorage.setItem(CREDENTIAL, JSON.stringify({kind, value: secret}));
    $('secret').value = '';
    await start();
  }

  function signOut() {
    sessionStorage.removeItem(CREDENTIAL);
    sessionStorage.removeItem(PLACE);
    location.reload();
  }

  async function start() {
    try {
      state.me = await api('GET', 'account/me');
    } catch (error) {
      sessionStorage.removeItem(CREDENTIAL);
      $('sign-in').hidden = false;
      say(error.status === 401 ? 'That credential was not accepted.' : 'Sign in failed: ' + error.message, true);
      return;
    }
    $('sign-in').hidden = true;
    $('session').hidden = false;
    $('workspace').hidden = false;
    $('who').textContent = 'Signed in as ' + (state.me.email || state.me.id);
    // the task this tab had open is read beside the projects and the queue (one round trip less)
    const saved = place();
    const opening = saved.taskId
      ? api('GET', 'tasks/' + enc(saved.taskId)).then(openTask).then(() => true, () => {
        remember({taskId: null});
        return false;
      }) : Promise.resolve(false);
    try {
      const [projects, statuses] = await Promise.all([
        pages('projects?sort=' + enc('name:asc'), 5), pages('task-statuses', 5)]);
      state.projects = projects;
      state.doneStatuses = new Set(statuses.filter((s) => s.statusType === 'DONE')
        .map((s) => s.organizationId + '/' + s.slug));
    } catch (error) {
      say('The projects could not be read: ' + error.message, true);
      return;
    }
    const select = $('project');
    select.replaceChildren(...state.projects.map((p) => el('option', {value: p.id, textContent: p.name})));
    if (saved.projectId && state.projects.some((p) => p.id === saved.projectId)) select.value = saved.projectId;
    remember({projectId: select.value || null});
    await refreshQueue();
    if (await opening) return;
    say(state.queue.length ? 'Choose a task, or take the next one.' : 'Take the next task to start.');
  }

  // ------------------------------------------------------------------ the queue

  const isReview = (task) => Boolean(task && task.metadata && task.metadata.extractionReview &&
                                     task.metadata.extractionReview.documentFamilyId);
  const isDone = (task) => state.doneStatuses.has(task.organizationId + '/' + task.statusSlug);

  async function refreshQueue() {
    const projectId = $('project').value;
    if (!projectId) { state.queue = []; drawQueue(); return; }
    const filter = `projectId == ${q(projectId)} and assigneeId == ${q(state.me.id)}`;
    const tasks = await pages(`tasks?filter=${enc(filter)}&sort=${enc('createdOn:asc')}`, 5);
    state.queue = tasks.filter((t) => isReview(t) && !isDone(t));
    drawQueue();
  }

  function drawQueue() {
    const list = $('queue-list');
    list.replaceChildren(...state.queue.map((task) => el('li', {},
      el('button', {type: 'button', textContent: task.title || task.id, dataset: {taskId: task.id},
                    ariaCurrent: String(Boolean(state.task && state.task.id === task.id)),
                    onclick: () => openTask(task)}))));
    $('queue-empty').hidden = state.queue.length > 0;
  }

  async function takeNext() {
    const projectId = $('project').value;
    if (!projectId) { say('Choose a project first.', true); return null; }
    say('Taking the next task…');
    const task = await api('POST', 'tasks/take-next', {projectId});
    if (!task) { say('No task is waiting in this project.'); return null; }
    await refreshQueue();
    if (!isReview(task)) {
      say(`"${task.title || task.id}" is not a review task; it is assigned to you: work on it elsewhere.`, true);
      return null;
    }
    await openTask(task);
    return task;
  }

  /* Ctrl+Enter: save the field being edited (if changed), then open the next task of the queue,
     else take the next one. The task itself closes on the server when its last exception closes;
     a task with exceptions left stays assigned to the reviewer, in the queue. */
  async function finishAndNext() {
    if (state.busy) return;
    const input = state.editing;
    if (input && input.isConnected && isDirty(input)) {
      if (!(await save(input, false))) return;
    }
    await refreshQueue();
    const current = state.task && state.task.id;
    const next = state.queue.find((t) => t.id !== current);
    if (next) await openTask(next);
    else {
      const taken = await takeNext();
      if (!taken) {
        clearTask();
        say('No more review tasks in this project.');
      }
    }
  }

  function clearTask() {
    state.task = null;
    remember({taskId: null});
    $('doc-title').textContent = 'No task open';
    $('page-list').replaceChildren();
    $('field-list').replaceChildren();
    $('task-state').textContent = '';
    drawQueue();
  }

  // ------------------------------------------------------------------ a task

  async function openTask(task) {
    if (!isReview(task)) { say('That task is not a review task.', true); return; }
    const review = task.metadata.extractionReview;
    state.task = task;
    state.picked.clear();
    state.editing = null;
    remember({taskId: task.id});
    drawQueue();
    $('doc-title').textContent = task.title || 'Document';
    $('page-list').replaceChildren();
    $('field-list').replaceChildren();
    say('Opening the task…');
    try {
      const [family] = await Promise.all([
        api('GET', 'document-families/' + enc(review.documentFamilyId)), loadValues()]);
      state.family = family;
      $('doc-title').textContent = family.path || task.title || 'Document';
      await loadDefinitions();
    } catch (error) {
      say('The task could not be opened: ' + error.message, true);
      return;
    }
    drawFields();
    document.body.dataset.ready = task.id;
    performance.mark('review-fields-ready');
    focusOpenField(null);
    say(summary());
    drawPages(review.documentFamilyId).catch((error) => say('The pages could not be shown: ' + error.message, true));
  }

  async function loadValues() {
    const review = state.task.metadata.extractionReview;
    const filter = `documentFamilyId == ${q(review.documentFamilyId)}`;
    const [objects, exceptions] = await Promise.all([
      pages(`data-objects?filter=${enc(filter)}&sort=${enc('sourceOrdering:asc')}`, MAX_OBJECT_PAGES),
      pages(`exceptions?documentFamilyId=${enc(review.documentFamilyId)}&state=OPEN`, MAX_OBJECT_PAGES)]);
    const ofRun = (record) => (!review.sourceKey || !record.sourceKey || record.sourceKey === review.sourceKey) &&
      (!review.dataStoreId || !record.dataStoreId || record.dataStoreId === review.dataStoreId);
    state.objects = objects.filter(ofRun);
    state.exceptions = exceptions.filter(ofRun);
    state.cut = objects.cut || exceptions.cut;
  }

  async function loadDefinitions() {
    const ids = [...new Set(state.objects.map((o) => o.dataDefinitionId).filter(Boolean))]
      .filter((id) => !state.definitions.has(id));
    await Promise.all(ids.map(async (id) => {
      try { state.definitions.set(id, await api('GET', 'data-definitions/' + enc(id))); } catch (e) {
        state.definitions.set(id, null);   // unknown: every value of a failing check is open
      }
    }));
  }

  function summary() {
    const open = state.exceptions.length;
    const cut = state.cut ? ` Only the first ${MAX_OBJECT_PAGES * 100} objects and exceptions are shown.` : '';
    return (open ? `${open} open exception(s). Tab to the next open field; Enter accepts or saves.`
      : 'No open exception: the task is done. Ctrl+Enter opens the next task.') + cut;
  }

  // ------------------------------------------------------------------ which fields are open

  function groupTaxon(definition, path) {
    let found = null;
    const walk = (taxons, prefix) => (taxons || []).forEach((t) => {
      const here = prefix ? prefix + '/' + t.name : t.name;
      if (here === path) found = t;
      walk(t.children, here);
    });
    walk(definition && definition.taxons, '');
    return found;
  }

  /* The tags a failing group check reads: the names its ruleFormula uses (the exception's key
     ends with the check's name); with no definition, every tag of the object. */
  function tagsOfCheck(object, exception) {
    const definition = state.definitions.get(object.dataDefinitionId);
    const group = definition ? groupTaxon(definition, object.path) : null;
    const tags = new Set((object.attributes || []).map((a) => a.tag));
    if (!group) return tags;
    const name = String(exception.key || '').split('|').pop();
    const checks = (group.validations || []).filter((v) => !name || (v.name || v.ruleFormula) === name);
    const used = new Set();
    for (const check of checks.length ? checks : group.validations || []) {
      for (const word of String(check.ruleFormula || '').match(/[A-Za-z_][A-Za-z0-9_]*/g) || []) {
        if (tags.has(word)) used.add(word);
      }
    }
    return used.size ? used : tags;
  }

  function openState() {
    const byAttribute = new Map();
    const byObject = new Map();
    for (const e of state.exceptions) {
      if (e.attributeId) {
        if (!byAttribute.has(e.attributeId)) byAttribute.set(e.attributeId, []);
        byAttribute.get(e.attributeId).push(e);
      } else if (e.dataObjectId) {
        if (!byObject.has(e.dataObjectId)) byObject.set(e.dataObjectId, []);
        byObject.get(e.dataObjectId).push(e);
      }
    }
    const open = new Set();
    for (const object of state.objects) {
      for (const a of object.attributes || []) if (byAttribute.has(a.id)) open.add(a.id);
      for (const e of byObject.get(object.id) || []) {
        const tags = tagsOfCheck(object, e);
        for (const a of object.attributes || []) if (tags.has(a.tag)) open.add(a.id);
      }
    }
    return {byAttribute, byObject, open};
  }

  // ------------------------------------------------------------------ the field list

  function shown(a) {
    if (a.typedValue === undefined || a.typedValue === null) return '';
    return typeof a.typedValue === 'object' ? JSON.stringify(a.typedValue) : String(a.typedValue);
  }

  function fieldInput(object, a, label, open) {
    const input = el('input', {type: 'text', id: 'field-' + a.id, value: a.value === undefined || a.value === null
      ? '' : String(a.value), autocomplete: 'off', spellcheck: false,
      dataset: {attributeId: a.id, objectId: object.id}, tabIndex: open ? 0 : -1});
    input.dataset.original = input.value;
    input.setAttribute('aria-label', label);
    if (open) input.setAttribute('aria-invalid', 'true');
    input.addEventListener('focus', () => { state.editing = input; showBox(a.id); });
    input.addEventListener('keydown', onFieldKey);
    input.addEventListener('input', () => input.classList.toggle('dirty', isDirty(input)));
    return input;
  }

  function messages(list) {
    if (!list || !list.length) return null;
    return el('ul', {className: 'messages'}, ...list.map((e) => el('li', {textContent: e.message || e.exceptionType})));
  }

  function meta(a) {
    const parts = [];
    const typed = shown(a);
    if (typed) parts.push(`${a.type || 'value'}: ${typed}`);
    if (typeof a.confidence === 'number') parts.push(`confidence ${a.confidence.toFixed(2)}`);
    if (a.reviewStatus) parts.push(a.reviewStatus.toLowerCase());
    return parts.join(' · ');
  }

  function drawFields() {
    const {byAttribute, byObject, open} = openState();
    state.open = open;
    const roots = state.objects.filter((o) => !o.parentId || !state.objects.some((p) => p.id === o.parentId));
    const rest = state.objects.filter((o) => !roots.includes(o));
    const out = [];
    for (const object of roots) {
      const section = el('section', {className: 'group'},
        el('h3', {textContent: object.path || 'Object'}), messages(byObject.get(object.id)));
      for (const a of object.attributes || []) {
        const label = a.label || a.tag || a.path;
        const isOpen = open.has(a.id);
        const input = fieldInput(object, a, label, isOpen);
        section.append(el('div', {className: 'field' + (isOpen ? ' open' : ''), dataset: {attributeId: a.id}},
          el('label', {htmlFor: input.id, textContent: label}), input,
          el('div', {className: 'meta', textContent: meta(a)}), messages(byAttribute.get(a.id))));
      }
      out.push(section);
    }
    const groups = new Map();
    for (const object of rest) {
      if (!groups.has(object.path)) groups.set(object.path, []);
      groups.get(object.path).push(object);
    }
    for (const [path, rows] of groups) {
      const columns = [];
      for (const row of rows) for (const a of row.attributes || []) {
        if (!columns.some((c) => c.tag === a.tag)) columns.push({tag: a.tag, label: a.label || a.tag});
      }
      const head = el('tr', {}, el('th', {scope: 'col', textContent: '#'}),
        ...columns.map((c) => el('th', {scope: 'col', textContent: c.label})), el('th', {scope: 'col', textContent: 'Checks'}));
      const body = rows.map((row, i) => el('tr', {dataset: {objectId: row.id}},
        el('th', {scope: 'row', textContent: String(row.rowNum || i + 1)}),
        ...columns.map((c) => {
          const a = (row.attributes || []).find((x) => x.tag === c.tag);
          if (!a) return el('td', {});
          const isOpen = open.has(a.id);
          return el('td', {className: isOpen ? 'open' : '', dataset: {attributeId: a.id}},
            fieldInput(row, a, `${c.label}, row ${row.rowNum || i + 1}`, isOpen),
            el('div', {className: 'meta', textContent: meta(a)}), messages(byAttribute.get(a.id)));
        }),
        el('td', {}, messages(byObject.get(row.id)))));
      out.push(el('section', {className: 'group'}, el('h3', {textContent: path}),
        el('table', {}, el('thead', {}, head), el('tbody', {}, ...body))));
    }
    $('field-list').replaceChildren(...out);
    $('task-state').textContent = state.exceptions.length
      ? `${state.exceptions.length} open exception(s)` : 'No open exception';
    drawBoxes();
  }

  // ------------------------------------------------------------------ the pages

  async function drawPages(familyId) {
    const list = $('page-list');
    const first = await api('GET', `document-families/${enc(familyId)}/pages/1/image?dpi=${DPI}`);
    const count = Math.min(first.pageCount || 1, MAX_PAGES);
    for (let n = 1; n <= count; n++) {
      if (!state.task || state.task.metadata.extractionReview.documentFamilyId !== familyId) return;
      const [image, words] = await Promise.all([
        n === 1 ? first : api('GET', `document-families/${enc(familyId)}/pages/${n}/image?dpi=${DPI}`),
        api('GET', `document-families/${enc(familyId)}/pages/${n}/words`).catch(() => ({words: []}))]);
      const width = words.width || (image.width * 72 / (image.dpi || DPI));
      const height = words.height || (image.height * 72 / (image.dpi || DPI));
      state.pageSizes.set(n, {width, height});
      const page = el('div', {className: 'page', id: 'page-' + n, dataset: {page: String(n)}});
      page.style.aspectRatio = `${width} / ${height}`;
      page.append(el('img', {className: 'page-image', src: image.url, alt: `Page ${n} of ${first.pageCount || count}`,
                             referrerPolicy: 'no-referrer', decoding: 'async'}));
      const wordLayer = el('div', {className: 'layer words'});
      for (const w of words.words || []) {
        const span = el('span', {className: 'word', title: w.text, dataset: {nodeId: w.id, text: w.text}});
        place4(span, w.bbox, width, height);
        span.addEventListener('mousedown', (event) => event.preventDefault());   // the field keeps the focus
        span.addEventListener('click', (event) => takeWord(span, event.shiftKey));
        wordLayer.append(span);
      }
      page.append(wordLayer, el('div', {className: 'layer boxes', ariaHidden: 'true'}));
      list.append(page);
      drawBoxes();
    }
    if ((first.pageCount || 1) > count) list.append(el('p', {className: 'hint',
      textContent: `Pages ${count + 1}-${first.pageCount} are not shown (at most ${MAX_PAGES}).`}));
  }

  function place4(node, bbox, width, height) {
    const [x0, y0, x1, y1] = bbox.map(Number);
    node.style.left = (100 * x0 / width) + '%';
    node.style.top = (100 * y0 / height) + '%';
    node.style.width = (100 * (x1 - x0) / width) + '%';
    node.style.height = (100 * (y1 - y0) / height) + '%';
  }

  function drawBoxes() {
    for (const layer of document.querySelectorAll('.layer.boxes')) layer.replaceChildren();
    const open = state.open || new Set();
    for (const object of state.objects) {
      for (const a of object.attributes || []) {
        const f = a.dataFeatures || {};
        const size = state.pageSizes.get(Number(f.page));
        const layer = document.querySelector(`#page-${Number(f.page)} .layer.boxes`);
        if (!size || !layer || !Array.isArray(f.bbox) || f.bbox.length !== 4) continue;
        const box = el('div', {className: 'box' + (open.has(a.id) ? ' open' : ''), id: 'box-' + a.id,
                               title: a.label || a.tag || ''});
        place4(box, f.bbox, size.width, size.height);
        layer.append(box);
      }
    }
    if (state.editing) showBox(state.editing.dataset.attributeId, true);
  }

  function showBox(attributeId, quiet) {
    for (const box of document.querySelectorAll('.box.active')) box.classList.remove('active');
    const box = document.getElementById('box-' + attributeId);
    if (!box) return;
    box.classList.add('active');
    if (!quiet) box.scrollIntoView({block: 'center', inline: 'nearest'});
  }

  // ------------------------------------------------------------------ editing

  function isDirty(input) {
    return input.value !== input.dataset.original || state.picked.has(input.dataset.attributeId);
  }

  function takeWord(span, add) {
    const input = state.editing;
    if (!input || !input.isConnected) { say('Choose a field first, then click a word.', true); return; }
    const id = input.dataset.attributeId;
    const before = add ? state.picked.get(id) : null;
    const picked = {nodeIds: [...(before ? before.nodeIds : []), span.dataset.nodeId].slice(0, 50),
                    text: (before ? before.text + ' ' : '') + span.dataset.text};
    state.picked.set(id, picked);
    for (const w of document.querySelectorAll('.word.picked')) w.classList.remove('picked');
    for (const nodeId of picked.nodeIds) {
      const w = document.querySelector(`.word[data-node-id="${CSS.escape(nodeId)}"]`);
      if (w) w.classList.add('picked');
    }
    input.value = picked.text;
    input.classList.toggle('dirty', true);
    input.focus({preventScroll: true});
    say('Press Enter to save, Esc to undo.');
  }

  function undo(input) {
    input.value = input.dataset.original;
    state.picked.delete(input.dataset.attributeId);
    input.classList.remove('dirty');
    for (const w of document.querySelectorAll('.word.picked')) w.classList.remove('picked');
    say('Edit undone.');
  }

  async function save(input, moveOn) {
    if (state.busy) return false;
    const id = input.dataset.attributeId;
    const objectId = input.dataset.objectId;
    const picked = state.picked.get(id);
    let body;
    if (!isDirty(input)) body = {confirmed: true};
    else {
      body = {value: input.value};
      if (picked) body.nodeIds = picked.nodeIds;
    }
    state.busy = true;
    say(body.confirmed ? 'Accepting…' : 'Saving…');
    let answer;
    try {
      answer = await api('PUT', `data-objects/${enc(objectId)}/attributes/${enc(id)}`, body);
    } catch (error) {
      state.busy = false;
      say((body.confirmed ? 'Not accepted: ' : 'Not saved: ') + error.message, true);
      return false;
    }
    state.picked.delete(id);
    for (const w of document.querySelectorAll('.word.picked')) w.classList.remove('picked');
    try {
      await loadValues();
    } finally {
      state.busy = false;
    }
    drawFields();
    const task = answer && answer.reviewTask;
    let text = (body.confirmed ? 'Accepted. ' : 'Saved. ') + summary();
    if (task && task.closed) text = (body.confirmed ? 'Accepted. ' : 'Saved. ') +
      'The last exception is closed: the task is done. Ctrl+Enter opens the next task.';
    say(text);
    if (task && task.closed) await refreshQueue();
    if (moveOn) focusOpenField(id);
    return true;
  }

  function openInputs() {
    return [...document.querySelectorAll('#field-list input[tabindex="0"]')];
  }

  /* Focus the open field after the one with ``afterId`` (or the first), else the page's list. */
  function focusOpenField(afterId) {
    const all = [...document.querySelectorAll('#field-list input')];
    const open = openInputs();
    if (!open.length) {
      const same = afterId && document.getElementById('field-' + afterId);
      if (same) same.focus(); else $('fields-title').scrollIntoView({block: 'nearest'});
      return;
    }
    let next = open[0];
    if (afterId) {
      const at = all.findIndex((i) => i.dataset.attributeId === afterId);
      next = open.find((i) => all.indexOf(i) > at) || open[0];
    }
    next.focus();
  }

  function onFieldKey(event) {
    const input = event.currentTarget;
    if (event.key === 'Enter' && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      save(input, true);
    } else if (event.key === 'Escape') {
      event.preventDefault();
      undo(input);
    }
  }

  function onKey(event) {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey) && state.me) {
      event.preventDefault();
      finishAndNext().catch((error) => say(error.message, true));
    }
  }

  // ------------------------------------------------------------------ wiring

  document.addEventListener('DOMContentLoaded', () => {
    $('sign-in-form').addEventListener('submit', (event) => signIn(event).catch((e) => say(e.message, true)));
    $('sign-out').addEventListener('click', signOut);
    $('take-next').addEventListener('click', () => takeNext().catch((e) => say('Take next failed: ' + e.message, true)));
    $('finish').addEventListener('click', () => finishAndNext().catch((e) => say(e.message, true)));
    $('project').addEventListener('change', () => {
      remember({projectId: $('project').value, taskId: null});
      clearTask();
      refreshQueue().catch((e) => say(e.message, true));
    });
    document.addEventListener('keydown', onKey);
    if (credential()) start().catch((e) => say(e.message, true));
    else $('secret').focus();
  });
})();
