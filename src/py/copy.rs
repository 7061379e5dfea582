//! `deep_copy_model`: google-adk's `utils._model_copy.deep_copy_model`
//! (2.12+, the `__deepcopy__` of `Session` and `Event`) made natively.
//!
//! Copying Python objects is a binding concern only: there is no decision
//! for the core to make. The walk is google-adk's step for step, so the
//! copy, the memo and the keep-alive list at `memo[id(memo)]` end as
//! google-adk leaves them: lists, dicts, sets and models whose class's
//! `__deepcopy__` is pydantic's, google-adk's or ours are copied here
//! (memo entries and keep-alive appends in google-adk's order); the six
//! atomic types (exact types only) are returned as they are; every other
//! value goes to `copy.deepcopy(value, memo)` with the same memo.
//!
//! Depth: every container or model level enters CPython's recursion guard
//! (`Py_EnterRecursiveCall`), so a deep tree raises the `RecursionError`
//! google-adk's recursive Python raises; past [`MAX_NATIVE_DEPTH`] levels
//! (a raised recursion limit) the rest of the branch is handed to
//! `copy.deepcopy`, which recurses in Python frames, so the Rust stack
//! never grows past a fixed bound.

use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PySet, PyString, PyTuple, PyType};
use pyo3::PyTypeInfo;

/// Container and model levels copied on the Rust stack before the rest of
/// a branch is handed to `copy.deepcopy` (only reached when the recursion
/// limit was raised past it): a fixed bound on the native recursion, which
/// `test_the_native_depth_bound_holds_on_a_small_stack` shows fits a 4 MB
/// thread stack (unbounded, 50,000 levels overflow it).
const MAX_NATIVE_DEPTH: u32 = 512;

/// What the copier compares against, looked up once per interpreter.
struct Known {
    /// pydantic's `BaseModel.__deepcopy__`.
    base_deepcopy: Py<PyAny>,
    /// `copy.deepcopy`.
    deepcopy: Py<PyAny>,
    /// `pydantic_core.PydanticUndefined`.
    undefined: Py<PyAny>,
    /// `object.__getattribute__`: a class that keeps it has its instances'
    /// slots read by `PyObject_GenericGetAttr` directly.
    object_getattribute: Py<PyAny>,
    /// `object.__new__`'s slot (`object_new`): a class whose `tp_new` is it
    /// gets `cls.__new__(cls)` by a direct call.
    object_new: usize,
}

static KNOWN: PyOnceLock<Known> = PyOnceLock::new();

/// Our own copier: the Python function `install()` binds as a class's
/// `__deepcopy__` (this builtin would not bind as a method), recognised like
/// google-adk's.
static OURS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn known(py: Python<'_>) -> PyResult<&Known> {
    KNOWN.get_or_try_init(py, || {
        let base = py.import("pydantic")?.getattr("BaseModel")?;
        // SAFETY: `object` is a live static type; PyType_GetSlot accepts
        // static types since 3.10 (the abi3 floor).
        let object_new = unsafe {
            ffi::PyType_GetSlot(
                std::ptr::addr_of_mut!(ffi::PyBaseObject_Type),
                ffi::Py_tp_new,
            )
        } as usize;
        Ok(Known {
            base_deepcopy: base.getattr(intern!(py, "__deepcopy__"))?.unbind(),
            deepcopy: py.import("copy")?.getattr("deepcopy")?.unbind(),
            object_getattribute: py
                .get_type::<pyo3::types::PyAny>()
                .getattr(intern!(py, "__getattribute__"))?
                .unbind(),
            undefined: py
                .import("pydantic_core")?
                .getattr("PydanticUndefined")?
                .unbind(),
            object_new,
        })
    })
}

fn ours(py: Python<'_>) -> PyResult<&Py<PyAny>> {
    OURS.get_or_try_init(py, || {
        Ok(py
            .import("adk_fastcompact._copy")?
            .getattr("deep_copy_model")?
            .unbind())
    })
}

/// google-adk's own `deep_copy_model`, when its module is loaded (a class
/// can only hold it as `__deepcopy__` once it is).
fn adk_copier(py: Python<'_>) -> PyResult<Option<Bound<'_, PyAny>>> {
    // SAFETY: `sys.modules`, borrowed from the interpreter.
    let modules = unsafe { Bound::from_borrowed_ptr(py, ffi::PyImport_GetModuleDict()) };
    let modules = modules.cast_into::<PyDict>()?;
    match modules.get_item(intern!(py, "google.adk.utils._model_copy"))? {
        Some(m) if !m.is_none() => m.getattr_opt(intern!(py, "deep_copy_model")),
        _ => Ok(None),
    }
}

/// Returns a deep copy of a pydantic model, as google-adk's
/// `deep_copy_model(model, memo)` does.
#[pyfunction]
#[pyo3(signature = (model, memo = None))]
pub fn deep_copy_model<'py>(
    model: &Bound<'py, PyAny>,
    memo: Option<Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = model.py();
    let memo = match memo {
        Some(m) => m,
        None => PyDict::new(py),
    };
    let memo_id = id(&memo)?;
    let keep_alive = match memo.get_item(&memo_id)? {
        Some(k) if !k.is_none() => k,
        _ => {
            let k = PyList::empty(py).into_any();
            memo.set_item(&memo_id, &k)?;
            k
        }
    };
    let k = known(py)?;
    let ours = ours(py)?;
    let mut copiers = vec![k.base_deepcopy.as_ptr(), ours.as_ptr()];
    let adk = adk_copier(py)?;
    if let Some(a) = &adk {
        copiers.push(a.as_ptr());
    }
    let mut copier = Copier {
        py,
        memo,
        keep_alive_list: keep_alive.is_exact_instance_of::<PyList>(),
        keep_alive,
        known: k,
        copiers,
        atomic: atomic_types(py),
        classes: Vec::new(),
        depth: 0,
    };
    let info = copier.class_info(&model.get_type())?;
    copier.model(model, id(model)?, info)
}

/// The six types google-adk returns as they are (exact types only).
fn atomic_types(py: Python<'_>) -> [*mut ffi::PyTypeObject; 6] {
    [
        py.None().bind(py).get_type_ptr(),
        pyo3::types::PyBool::type_object_raw(py),
        pyo3::types::PyInt::type_object_raw(py),
        pyo3::types::PyFloat::type_object_raw(py),
        PyString::type_object_raw(py),
        pyo3::types::PyBytes::type_object_raw(py),
    ]
}

/// `id(obj)`.
fn id<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: CPython's `id` is `PyLong_FromVoidPtr(obj)`; a new reference
    // or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(obj.py(), ffi::PyLong_FromVoidPtr(obj.as_ptr().cast())) }
}

/// One copy: the memo, its keep-alive list and what values are compared to.
struct Copier<'py, 'k> {
    py: Python<'py>,
    memo: Bound<'py, PyDict>,
    keep_alive: Bound<'py, PyAny>,
    /// Whether `keep_alive` is a list (appended to directly), as google-adk
    /// makes it; a memo handed in with something else there gets `append`.
    keep_alive_list: bool,
    known: &'k Known,
    /// The `__deepcopy__` functions whose classes are copied here.
    copiers: Vec<*mut ffi::PyObject>,
    atomic: [*mut ffi::PyTypeObject; 6],
    /// What this copy learned of the classes it met (held, so an address
    /// names one class for the whole copy).
    classes: Vec<(Bound<'py, PyType>, ClassInfo)>,
    depth: u32,
}

/// What a copy needs to know of a class.
#[derive(Clone, Copy)]
struct ClassInfo {
    /// Its `__deepcopy__` is one of the copiers copied here.
    copied_here: bool,
    /// It keeps `object.__getattribute__`: attribute reads may go straight
    /// to `PyObject_GenericGetAttr` (and to the full lookup, `__getattr__`
    /// included, when that fails).
    generic_getattr: bool,
}

/// Classes remembered per copy (a session has a few dozen model classes).
const MAX_CLASSES: usize = 64;

impl<'py> Copier<'py, '_> {
    #[inline]
    fn is_atomic(&self, obj: &Bound<'py, PyAny>) -> bool {
        let ty = obj.get_type_ptr();
        self.atomic.contains(&ty)
    }

    fn keep(&self, obj: &Bound<'py, PyAny>) -> PyResult<()> {
        if self.keep_alive_list {
            // SAFETY: `keep_alive` is a list; both objects are live.
            let rc = unsafe { ffi::PyList_Append(self.keep_alive.as_ptr(), obj.as_ptr()) };
            if rc != 0 {
                return Err(PyErr::fetch(self.py));
            }
            Ok(())
        } else {
            self.keep_alive
                .call_method1(intern!(self.py, "append"), (obj,))
                .map(drop)
        }
    }

    /// google-adk's `_deep_copy(value, memo, keep_alive)`.
    fn value(&mut self, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if self.is_atomic(value) {
            return Ok(value.clone());
        }
        let key = id(value)?;
        if let Some(copied) = self.memo.get_item(&key)? {
            return Ok(copied);
        }
        if self.depth >= MAX_NATIVE_DEPTH {
            return self.foreign(value);
        }
        if value.is_exact_instance_of::<PyList>() {
            return self.list(value.cast_exact::<PyList>()?, key);
        }
        if value.is_exact_instance_of::<PyDict>() {
            return self.dict(value.cast_exact::<PyDict>()?, key);
        }
        if value.is_exact_instance_of::<PySet>() {
            return self.set(value, key);
        }
        let info = self.class_info(&value.get_type())?;
        if info.copied_here {
            self.model(value, key, info)
        } else {
            self.foreign(value)
        }
    }

    /// What `ty`'s `__deepcopy__` and `__getattribute__` are, looked up
    /// once per copy.
    fn class_info(&mut self, ty: &Bound<'py, PyType>) -> PyResult<ClassInfo> {
        if let Some((_, info)) = self.classes.iter().find(|(t, _)| t.is(ty)) {
            return Ok(*info);
        }
        let py = self.py;
        let copier = ty.getattr_opt(intern!(py, "__deepcopy__"))?;
        let getattribute = ty.getattr_opt(intern!(py, "__getattribute__"))?;
        let info = ClassInfo {
            copied_here: matches!(&copier, Some(c) if self.copiers.contains(&c.as_ptr())),
            generic_getattr: matches!(
                &getattribute,
                Some(g) if g.is(self.known.object_getattribute.bind(py))
            ),
        };
        if self.classes.len() < MAX_CLASSES {
            self.classes.push((ty.clone(), info));
        }
        Ok(info)
    }

    /// `getattr(obj, name)` where it succeeds on `PyObject_GenericGetAttr`
    /// and the class keeps `object.__getattribute__` (what its
    /// `tp_getattro` runs first), else None: the caller then makes the full
    /// lookup (pydantic's `__getattr__` included), which raises or finds.
    fn generic_attr(
        &self,
        obj: &Bound<'py, PyAny>,
        name: &Bound<'py, PyString>,
        info: ClassInfo,
    ) -> Option<Bound<'py, PyAny>> {
        if !info.generic_getattr {
            return None;
        }
        // SAFETY: live objects; a new reference or NULL with an exception
        // set (dropped: the full lookup raises it again, or finds the value).
        let found = unsafe { ffi::PyObject_GenericGetAttr(obj.as_ptr(), name.as_ptr()) };
        if found.is_null() {
            drop(PyErr::take(self.py));
            return None;
        }
        // SAFETY: the new reference just made.
        Some(unsafe { Bound::from_owned_ptr(self.py, found) })
    }

    /// `getattr(obj, name)` (by [`Copier::generic_attr`] where it can).
    fn attr(
        &self,
        obj: &Bound<'py, PyAny>,
        name: &Bound<'py, PyString>,
        info: ClassInfo,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.generic_attr(obj, name, info) {
            Some(v) => Ok(v),
            None => obj.getattr(name),
        }
    }

    /// `copy.deepcopy(value, memo)`: every value google-adk does not copy
    /// itself, with the same memo (what it records, returns and raises is
    /// `copy.deepcopy`'s).
    fn foreign(&self, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.known.deepcopy.bind(self.py).call1((value, &self.memo))
    }

    /// Runs `f` one level deeper, inside CPython's recursion guard (a deep
    /// tree raises its `RecursionError`, as google-adk's recursion does).
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> PyResult<T>) -> PyResult<T> {
        // SAFETY: a static NUL-terminated message; the thread holds the
        // interpreter. Left below, whatever `f` returns.
        if unsafe { ffi::Py_EnterRecursiveCall(c" while deep-copying a model".as_ptr()) } != 0 {
            return Err(PyErr::fetch(self.py));
        }
        self.depth += 1;
        let out = f(self);
        self.depth -= 1;
        // SAFETY: paired with the successful `Py_EnterRecursiveCall` above.
        unsafe { ffi::Py_LeaveRecursiveCall() };
        out
    }

    /// google-adk's list branch: recorded, kept alive, then each item
    /// appended (copied unless atomic), reading the list as its iterator
    /// does (its length at each step).
    fn list(
        &mut self,
        value: &Bound<'py, PyList>,
        key: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // A shallow copy first: atomic items (most) need no write.
        let copied = value.get_slice(0, value.len());
        self.memo.set_item(&key, &copied)?;
        self.keep(value.as_any())?;
        self.nested(|c| {
            let mut i = 0;
            while i < value.len() {
                let item = value.get_item(i)?;
                let item = if c.is_atomic(&item) {
                    item
                } else {
                    c.value(&item)?
                };
                if i < copied.len() {
                    // Unchanged unless copied, or unless `value` changed
                    // under a foreign `__deepcopy__`.
                    if !copied.get_item(i)?.is(&item) {
                        copied.set_item(i, item)?;
                    }
                } else {
                    copied.append(item)?;
                }
                i += 1;
            }
            if copied.len() > i {
                copied.del_slice(i, copied.len())?;
            }
            Ok(())
        })?;
        Ok(copied.into_any())
    }

    /// google-adk's dict branch: recorded, kept alive, then every item
    /// copied (keys that are not atomic too), in order.
    fn dict(
        &mut self,
        value: &Bound<'py, PyDict>,
        key: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // With atomic keys only (as good as always), a copy of the table
        // holds the same keys in the same order; only values that are not
        // atomic are then replaced (which keeps the order).
        let atomic_keys = self.atomic_keys(value);
        let copied = if atomic_keys {
            value.copy()?
        } else {
            PyDict::new(self.py)
        };
        self.memo.set_item(&key, &copied)?;
        self.keep(value.as_any())?;
        self.nested(|c| {
            for_each_item(value, |k, v| {
                let k = if c.is_atomic(&k) { k } else { c.value(&k)? };
                if c.is_atomic(&v) {
                    if !atomic_keys {
                        copied.set_item(k, v)?;
                    }
                } else {
                    copied.set_item(k, c.value(&v)?)?;
                }
                Ok(())
            })
        })?;
        Ok(copied.into_any())
    }

    /// Whether every key of `d` is of an atomic type (no Python code runs).
    fn atomic_keys(&self, d: &Bound<'py, PyDict>) -> bool {
        let mut pos: ffi::Py_ssize_t = 0;
        let mut k: *mut ffi::PyObject = std::ptr::null_mut();
        let mut v: *mut ffi::PyObject = std::ptr::null_mut();
        // SAFETY: `d` is a live dict; the borrowed keys are only read
        // (their type), with no Python code running in between.
        unsafe {
            while ffi::PyDict_Next(d.as_ptr(), &mut pos, &mut k, &mut v) != 0 {
                if !self.atomic.contains(&ffi::Py_TYPE(k)) {
                    return false;
                }
            }
        }
        true
    }

    /// google-adk's set branch: items added in iteration order (copied
    /// unless atomic), then recorded and kept alive.
    fn set(
        &mut self,
        value: &Bound<'py, PyAny>,
        key: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let copied = PySet::empty(self.py)?;
        self.nested(|c| {
            for item in value.try_iter()? {
                let item = item?;
                let item = if c.is_atomic(&item) {
                    item
                } else {
                    c.value(&item)?
                };
                copied.add(item)?;
            }
            Ok(())
        })?;
        self.memo.set_item(&key, &copied)?;
        self.keep(value)?;
        Ok(copied.into_any())
    }

    /// google-adk's `_deep_copy_model`: a new instance recorded before its
    /// fields are copied (a cycle back to `model` resolves to it), then
    /// `__dict__`, `__pydantic_extra__`, `__pydantic_fields_set__` (a
    /// shallow copy) and `__pydantic_private__` (undefined values dropped)
    /// set as `object.__setattr__` sets them.
    fn model(
        &mut self,
        model: &Bound<'py, PyAny>,
        key: Bound<'py, PyAny>,
        info: ClassInfo,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let clone = self.new_instance(model)?;
        self.memo.set_item(&key, &clone)?;
        self.keep(model)?;
        let fields = self.attr(model, intern!(py, "__dict__"), info)?;
        let copied_fields = match fields.cast_exact::<PyDict>() {
            Ok(d) => d.copy()?.into_any(),
            Err(_) => fields.call_method0(intern!(py, "copy"))?,
        };
        self.memo.set_item(id(&fields)?, &copied_fields)?;
        self.keep(&fields)?;
        self.nested(|c| {
            let mut field = |name: Bound<'py, PyAny>, value: Bound<'py, PyAny>| {
                if !value.is_none() && !c.is_atomic(&value) {
                    let v = c.value(&value)?;
                    copied_fields.set_item(name, v)?;
                }
                Ok(())
            };
            match fields.cast_exact::<PyDict>() {
                Ok(d) => for_each_item(d, field),
                Err(_) => {
                    for pair in fields.call_method0(intern!(py, "items"))?.try_iter()? {
                        let (name, value) = pair?.extract()?;
                        field(name, value)?;
                    }
                    Ok(())
                }
            }
        })?;
        set_slot(&clone, intern!(py, "__dict__"), &copied_fields)?;
        let extra = self.attr(model, intern!(py, "__pydantic_extra__"), info)?;
        let extra = if extra.is_none() {
            extra
        } else {
            self.nested(|c| c.value(&extra))?
        };
        set_slot(&clone, intern!(py, "__pydantic_extra__"), &extra)?;
        let fields_set = self.attr(model, intern!(py, "__pydantic_fields_set__"), info)?;
        let fields_set = if fields_set.is_exact_instance_of::<PySet>() {
            // SAFETY: `set.copy()` of an exact set is `PySet_New(set)` (the
            // same table layout); a new reference or NULL with an exception.
            unsafe { Bound::from_owned_ptr_or_err(py, ffi::PySet_New(fields_set.as_ptr()))? }
        } else {
            fields_set.call_method0(intern!(py, "copy"))?
        };
        set_slot(&clone, intern!(py, "__pydantic_fields_set__"), &fields_set)?;
        let private = match self.generic_attr(model, intern!(py, "__pydantic_private__"), info) {
            Some(p) => Some(p),
            None => model.getattr_opt(intern!(py, "__pydantic_private__"))?,
        };
        let private = match private {
            Some(p) if !p.is_none() => {
                let undefined = self.known.undefined.bind(py);
                let out = PyDict::new(py);
                self.nested(|c| {
                    for pair in p.call_method0(intern!(py, "items"))?.try_iter()? {
                        let (k, v): (Bound<'py, PyAny>, Bound<'py, PyAny>) = pair?.extract()?;
                        if !v.is(undefined) {
                            out.set_item(k, c.value(&v)?)?;
                        }
                    }
                    Ok(())
                })?;
                out.into_any()
            }
            _ => py.None().into_bound(py),
        };
        set_slot(&clone, intern!(py, "__pydantic_private__"), &private)?;
        Ok(clone)
    }

    /// `cls.__new__(cls)` for `model`'s class: a direct call of the slot
    /// when it is `object.__new__`'s (what `object.__new__(cls)` runs).
    fn new_instance(&self, model: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let cls = model.get_type();
        // SAFETY: a live type.
        let slot = unsafe { ffi::PyType_GetSlot(cls.as_type_ptr(), ffi::Py_tp_new) };
        if slot as usize == self.known.object_new && !slot.is_null() {
            // SAFETY: the slot is `object_new`, a `newfunc`; called with
            // the class, an empty argument tuple and no keywords, as
            // `object.__new__(cls)` calls it. A new reference or NULL with
            // an exception set.
            unsafe {
                let new: ffi::newfunc = std::mem::transmute(slot);
                let args = PyTuple::empty(py);
                Bound::from_owned_ptr_or_err(
                    py,
                    new(cls.as_type_ptr(), args.as_ptr(), std::ptr::null_mut()),
                )
            }
        } else {
            cls.getattr(intern!(py, "__new__"))?.call1((&cls,))
        }
    }
}

/// `object.__setattr__(obj, name, value)`, bypassing pydantic's
/// `__setattr__` as google-adk's `_object_setattr` does.
fn set_slot(
    obj: &Bound<'_, PyAny>,
    name: &Bound<'_, PyString>,
    value: &Bound<'_, PyAny>,
) -> PyResult<()> {
    // SAFETY: three live objects.
    let rc = unsafe { ffi::PyObject_GenericSetAttr(obj.as_ptr(), name.as_ptr(), value.as_ptr()) };
    if rc != 0 {
        return Err(PyErr::fetch(obj.py()));
    }
    Ok(())
}

/// `for k, v in d.items(): f(k, v)`, raising the `RuntimeError` the items
/// iterator raises when `f` changes the dict's size.
fn for_each_item<'py>(
    d: &Bound<'py, PyDict>,
    mut f: impl FnMut(Bound<'py, PyAny>, Bound<'py, PyAny>) -> PyResult<()>,
) -> PyResult<()> {
    let py = d.py();
    let len = d.len();
    let mut pos: ffi::Py_ssize_t = 0;
    loop {
        if d.len() != len {
            return Err(PyRuntimeError::new_err(
                "dictionary changed size during iteration",
            ));
        }
        let mut k: *mut ffi::PyObject = std::ptr::null_mut();
        let mut v: *mut ffi::PyObject = std::ptr::null_mut();
        // SAFETY: `d` is a live dict; the borrowed key and value are
        // referenced at once, before any Python code can run.
        let (k, v) = unsafe {
            if ffi::PyDict_Next(d.as_ptr(), &mut pos, &mut k, &mut v) == 0 {
                return Ok(());
            }
            (
                Bound::from_borrowed_ptr(py, k),
                Bound::from_borrowed_ptr(py, v),
            )
        };
        f(k, v)?;
    }
}
