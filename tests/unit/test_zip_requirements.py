"""infra/zip_requirements.py: `make package` fails when a runtime requirement is not in
deployment.zip, whether chalice said so ("Could not install dependencies", exit 0) or not. Small
zips built here; the real zip is checked by tests/unit/test_package.py and the deploy rehearsal."""
from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from chalice.constants import MISSING_DEPENDENCIES_TEMPLATE

from infra import package, zip_requirements


def _zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, 'w') as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def _requirements(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


RE2 = {'re2.py': '', '_re2.cpython-311-x86_64-linux-gnu.so': '',
       'google_re2-1.1.dist-info/METADATA': 'Name: google-re2\nVersion: 1.1\n',
       'google_re2-1.1.dist-info/RECORD': 're2.py,sha256=x,1\n_re2.cpython-311-x86_64-linux-gnu.so,sha256=y,2\n'
                                           'google_re2-1.1.dist-info/RECORD,,\n'}
JWT = {'jwt/__init__.py': '', 'pyjwt-2.15.1.dist-info/RECORD': 'jwt/__init__.py,sha256=z,3\n',
       'pyjwt-2.15.1.dist-info/METADATA': 'Name: PyJWT\nVersion: 2.15.1\n'
                                          'Requires-Dist: cryptography>=3.4; extra == "crypto"\n'
                                          'Requires-Dist: sphinx; extra == "docs"\n'}
CRYPTOGRAPHY = {'cryptography/__init__.py': '',
                'cryptography-50.0.2.dist-info/RECORD': 'cryptography/__init__.py,,\n../../bin/x,,\n'}


def test_a_zip_with_every_requirement_at_its_pin_passes(tmp_path):
    z = _zip(tmp_path / 'deployment.zip', {**RE2, **JWT, **CRYPTOGRAPHY})
    reqs = _requirements(tmp_path / 'requirements.txt',
                         '# comment\ngoogle-re2==1.1  # inline\n\npyjwt[crypto]==2.15.1\n')
    assert zip_requirements.missing(z, zip_requirements.requirements(reqs)) == []
    zip_requirements.check(z, reqs)


def test_a_requirement_missing_from_the_zip_fails_naming_it(tmp_path):
    z = _zip(tmp_path / 'deployment.zip', {**JWT, **CRYPTOGRAPHY})
    reqs = _requirements(tmp_path / 'requirements.txt', 'pyjwt[crypto]==2.15.1\ngoogle-re2==1.1.20251105\n')
    with pytest.raises(zip_requirements.MissingDependencies, match=r'google-re2==1\.1\.20251105: not installed'):
        zip_requirements.check(z, reqs)


def test_another_version_a_missing_module_or_a_missing_extra_fails(tmp_path):
    z = _zip(tmp_path / 'deployment.zip', {**{k: v for k, v in RE2.items() if k != 're2.py'}, **JWT})
    reqs = zip_requirements.requirements(
        _requirements(tmp_path / 'requirements.txt', 'google-re2==1.1\npyjwt[crypto]==2.16.0\n'))
    problems = zip_requirements.missing(z, reqs)
    assert 'google-re2==1.1: module(s) re2 absent' in problems
    assert 'pyjwt[crypto]==2.16.0: 2.15.1 installed' in problems
    assert 'pyjwt[crypto]==2.16.0: cryptography (extra) not installed' in problems
    assert not [p for p in problems if 'sphinx' in p]   # an extra not asked for is not required


def test_the_modules_of_a_record_are_its_importable_top_level_names():
    record = ('PIL/__init__.py,sha256=a,1\npillow.libs/libjpeg.so.62,sha256=b,2\n'
              'pillow-12.0.0.dist-info/RECORD,,\nwrapt-stubs/__init__.pyi,,\n_cffi_backend.cpython-311-x86_64-linux-gnu.so,,\n'
              'six.py,,\n__pycache__/six.cpython-311.pyc,,\nx-1.0.data/scripts/x,,\n../../bin/tool,,\n')
    assert zip_requirements.modules(record) == ['PIL', '_cffi_backend', 'six']


def test_chalices_could_not_install_dependencies_warning_fails_the_package():
    output = 'Creating deployment package.\n' + MISSING_DEPENDENCIES_TEMPLATE % 'google-re2==1.1.20251105'
    with pytest.raises(zip_requirements.MissingDependencies, match='google-re2==1.1.20251105'):
        zip_requirements.refuse_missing_dependencies(output)
    zip_requirements.refuse_missing_dependencies('Creating deployment package.\nWrote sam.json\n')


def test_make_package_stops_on_chalices_warning(tmp_path, monkeypatch, capsys):
    """infra/package.py: chalice's exit 0 with the warning is a failed package."""
    import subprocess

    def chalice(args, **kwargs):
        return subprocess.CompletedProcess(args, 0, stdout=MISSING_DEPENDENCIES_TEMPLATE % 'google-re2==1.1.20251105')

    monkeypatch.setattr(package.subprocess, 'run', chalice)
    with pytest.raises(SystemExit, match='Could not install dependencies: google-re2==1.1.20251105'):
        package.chalice_package('prod', tmp_path)
