"""physd_client.ops — builders of the messages a client sends most: shapes,
edit operations and settings (docs/protocol.md), so a script need not spell
out protobuf wrappers.

Normal path: each function returns a new protobuf message (ShapeDef, EditOp,
Settings); vectors are 3-tuples (x, y, z), orientations 4-tuples
(x, y, z, w), units as in proto/physd.proto (m, kg, s, rad).

Failure modes: an unknown settings key or enum value name raises KeyError or
ValueError here; every value is still validated by the server (a NaN or an
out-of-range value is INVALID_ARGUMENT there).

Invariants: nothing here talks to a server or keeps state.
"""
import os

from . import physd_pb2 as pb


def _vec(v, xyz):
    v.x, v.y, v.z = xyz


def sphere(radius=0.5, density=None, friction=None, restitution=0.0):
    s = pb.ShapeDef(type=pb.SHAPE_SPHERE, restitution=restitution)
    s.radius.value = radius
    return _material(s, density, friction)


def box(half_extents=(0.5, 0.5, 0.5), density=None, friction=None, restitution=0.0):
    s = pb.ShapeDef(type=pb.SHAPE_BOX, restitution=restitution)
    _vec(s.half_extents, half_extents)
    return _material(s, density, friction)


def capsule(radius=0.5, half_height=0.5, density=None, friction=None, restitution=0.0):
    s = pb.ShapeDef(type=pb.SHAPE_CAPSULE, restitution=restitution)
    s.radius.value, s.half_height.value = radius, half_height
    return _material(s, density, friction)


def plane(normal=(0.0, 0.0, 1.0), offset=0.0, friction=None):
    """For static bodies: the half-space normal . x <= offset is inside."""
    s = pb.ShapeDef(type=pb.SHAPE_PLANE, offset=offset)
    _vec(s.normal, normal)
    return _material(s, None, friction)


def _material(s, density, friction):
    if density is not None:
        s.density.value = density
    if friction is not None:
        s.friction.value = friction
    return s


def body(shapes, position=(0.0, 0.0, 0.0), orientation=None, velocity=None, angular_velocity=None, type="dynamic",
         mass=None, inertia=None, gravity_scale=None):
    """A BodyDef. type: "dynamic", "static" or "kinematic"; mass and inertia
    (principal moments) replace what the shapes give."""
    b = pb.BodyDef(type=pb.BodyType.Value("BODY_" + type.upper()))
    _vec(b.pose.position, position)
    if orientation is not None:
        b.pose.orientation.x, b.pose.orientation.y, b.pose.orientation.z, b.pose.orientation.w = orientation
    if velocity is not None:
        _vec(b.linear_velocity, velocity)
    if angular_velocity is not None:
        _vec(b.angular_velocity, angular_velocity)
    if mass is not None:
        b.mass.mass = mass
        _vec(b.mass.inertia, inertia if inertia is not None else (0.0, 0.0, 0.0))
    if gravity_scale is not None:
        b.gravity_scale.value = gravity_scale
    b.shapes.extend([shapes] if isinstance(shapes, pb.ShapeDef) else shapes)
    return b


def add_body(shapes, **kw):
    """EditOp AddBody (the edit's reply names the new id); keywords as body()."""
    op = pb.EditOp()
    op.add_body.body.CopyFrom(shapes if isinstance(shapes, pb.BodyDef) else body(shapes, **kw))
    return op


def remove_body(body_id):
    op = pb.EditOp()
    op.remove_body.body.id = body_id
    return op


def set_pose(body_id, position=None, orientation=None):
    op = pb.EditOp()
    op.set_pose.body.id = body_id
    if position is not None:
        _vec(op.set_pose.pose.position, position)
    if orientation is not None:
        q = op.set_pose.pose.orientation
        q.x, q.y, q.z, q.w = orientation
    return op


def set_velocity(body_id, linear=None, angular=None):
    op = pb.EditOp()
    op.set_velocity.body.id = body_id
    if linear is not None:
        _vec(op.set_velocity.linear, linear)
    if angular is not None:
        _vec(op.set_velocity.angular, angular)
    return op


def _at_point(field, body_id, vec, point):
    op = pb.EditOp()
    sub = getattr(op, field)
    sub.body.id = body_id
    _vec(getattr(sub, "impulse" if field == "apply_impulse" else "force"), vec)
    if point is not None:
        _vec(sub.point, point)
    return op


def apply_impulse(body_id, impulse, point=None):
    """An impulse (N s) at point (world frame; default the centre of mass)."""
    return _at_point("apply_impulse", body_id, impulse, point)


def apply_force(body_id, force, point=None):
    """A force (N) for the next step, at point (default the centre of mass)."""
    return _at_point("apply_force", body_id, force, point)


def settings(**kw):
    """A Settings message from keyword arguments named as its fields:
    settings(iterations=20, method="pgs_sm", gravity=(0, 0, -10),
    contact=(1e8, 4, 35)). Wrapped numbers and booleans take bare values,
    enums their value names without the prefix ("pgs_sm", "random"), Vec3 a
    3-tuple, Spook a (k, d, hertz) tuple or dict."""
    s = pb.Settings()
    for name, value in kw.items():
        fd = pb.Settings.DESCRIPTOR.fields_by_name.get(name)
        if fd is None:
            raise KeyError("Settings has no field %r" % name)
        sub = getattr(s, name)
        inner = sub.DESCRIPTOR.fields_by_name
        if sub.DESCRIPTOR.name == "Vec3":
            _vec(sub, value)
        elif sub.DESCRIPTOR.name == "Spook":
            if isinstance(value, dict):
                for k, v in value.items():
                    setattr(sub, k, v)
            else:
                sub.k, sub.d, sub.hertz = value
        elif "value" in inner and inner["value"].enum_type is not None:
            et = inner["value"].enum_type
            if isinstance(value, str):
                names = [v.name for v in et.values]
                prefix = os.path.commonprefix(names)
                prefix = prefix[:prefix.rfind("_") + 1]  # "METHOD_", "JOINT_SOLVER_"
                by_name = {v.name[len(prefix):].lower(): v.number for v in et.values}
                if value.lower() not in by_name:
                    raise ValueError("%s: unknown value %r (one of %s)" % (name, value, ", ".join(sorted(by_name))))
                value = by_name[value.lower()]
            sub.value = value
        elif "value" in inner:
            sub.value = value
        else:
            raise KeyError("Settings field %r is not a value" % name)
    return s
