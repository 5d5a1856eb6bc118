"""Locust users for `make load` (tests/load/run_load.py starts the server and this file).

Twenty ``Member`` users, each with its own API key, mix reads and writes at about one request a
second (60 a minute, inside the contract's 100 a minute and 20 a second per key), and one
``OverLimit`` user sends bursts of 30 requests at once every 10 s on its own key (past the 20 a
second burst limit whatever the server's speed): its 429s are expected and counted apart
(request names start with ``over-limit``). Any other non-2xx is a failure.
Credentials and ids come from LOAD_SETUP (a JSON file written by run_load.py)."""
from __future__ import annotations

import json
import os
import random
import threading

import gevent.pool
from locust import HttpUser, between, constant, events, task

SETUP = json.loads(open(os.environ['LOAD_SETUP']).read())
_keys = list(SETUP['memberKeys'])
_lock = threading.Lock()
OVER = {'429': 0, 'ok': 0, 'other': 0}   # the over-limit user's answers, written at the end


@events.test_stop.add_listener
def _write_over(**_kw):
    if os.environ.get('LOAD_OVER_OUT'):
        with open(os.environ['LOAD_OVER_OUT'], 'w') as f:
            json.dump(OVER, f)


class Member(HttpUser):
    weight = 20
    wait_time = between(0.8, 1.2)

    def on_start(self):
        with _lock:
            self.key = _keys.pop() if _keys else SETUP['memberKeys'][0]
        self.client.headers.update({'x-api-key': self.key, 'content-type': 'application/json'})
        self.mine: list[str] = []

    @task(4)
    def list_tasks(self):
        self.client.get(f"/api/tasks?filter=projectId=='{SETUP['projectId']}'&pageSize=20",
                        name='GET /api/tasks (project)')

    @task(3)
    def list_by_status(self):
        self.client.get(f"/api/tasks?filter=statusSlug=='s{random.randrange(3)}'&pageSize=20",
                        name='GET /api/tasks (statusSlug)')

    @task(3)
    def get_project(self):
        self.client.get(f"/api/projects/{SETUP['projectId']}", name='GET /api/projects/{id}')

    @task(2)
    def create_task(self):
        r = self.client.post('/api/tasks', json={'projectId': SETUP['projectId'], 'title': 'load',
                                                 'statusSlug': 's0'}, name='POST /api/tasks')
        if r.status_code == 201:
            self.mine.append(r.json()['id'])

    @task(2)
    def update_task(self):
        if self.mine:
            self.client.put(f'/api/tasks/{random.choice(self.mine)}', json={'description': 'changed'},
                            name='PUT /api/tasks/{id}')

    @task(2)
    def set_status(self):
        if self.mine:
            self.client.put(f'/api/tasks/{random.choice(self.mine)}/status',
                            json={'statusSlug': f's{random.randrange(3)}'}, name='PUT /api/tasks/{id}/status')

    @task(1)
    def get_task(self):
        if self.mine:
            self.client.get(f'/api/tasks/{random.choice(self.mine)}', name='GET /api/tasks/{id}')

    @task(2)
    def delete_task(self):
        if len(self.mine) > 3:
            self.client.delete(f'/api/tasks/{self.mine.pop(0)}', name='DELETE /api/tasks/{id}')


class OverLimit(HttpUser):
    fixed_count = 1
    wait_time = constant(10)
    BURST = 30

    def on_start(self):
        self.client.headers.update({'x-api-key': SETUP['overKey']})

    @task
    def burst(self):
        gevent.pool.Pool(self.BURST).map(lambda _: self.get_project(), range(self.BURST))

    def get_project(self):
        with self.client.get(f"/api/projects/{SETUP['projectId']}", name='over-limit GET /api/projects/{id}',
                             catch_response=True) as r:
            if r.status_code == 429:
                OVER['429'] += 1
                r.success()
            elif r.ok:
                OVER['ok'] += 1
            else:
                OVER['other'] += 1
